<?php
header("Content-Type: text/plain");
echo "Hello, PHP on corral!\n";
