<?php
// the request's body back as it came, read as a stream
header('Content-Type: application/octet-stream');
$in = fopen('php://input', 'rb');
while (!feof($in)) {
    echo fread($in, 65536);
}
