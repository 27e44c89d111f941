<?php
header('X-From-Php: set by php');
header('Cache-Control: no-store');
setcookie('a', '1');
setcookie('b', '2');
http_response_code(201);
echo "created\n";
