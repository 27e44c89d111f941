<?php
echo "sub index at ", $_SERVER['SCRIPT_NAME'], "\n";
