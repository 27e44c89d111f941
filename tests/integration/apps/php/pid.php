<?php
echo getmypid();
