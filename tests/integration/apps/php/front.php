<?php
echo "front controller for ", $_SERVER['REQUEST_URI'], "\n";
