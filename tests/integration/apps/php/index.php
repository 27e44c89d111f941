<?php
echo "Hello, Unit!\n";
