<?php
echo "page ", $_SERVER['SCRIPT_NAME'], " info ", $_SERVER['PATH_INFO'] ?? '', "\n";
