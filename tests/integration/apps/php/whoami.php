<?php
echo posix_getpwuid(posix_geteuid())['name'];
