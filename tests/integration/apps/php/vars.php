<?php
// the CGI variables php sees ($_SERVER), as JSON, for the tests to compare
$keys = ['SCRIPT_FILENAME', 'SCRIPT_NAME', 'PATH_INFO', 'DOCUMENT_ROOT', 'REQUEST_URI',
    'QUERY_STRING', 'REQUEST_METHOD', 'CONTENT_TYPE', 'CONTENT_LENGTH', 'SERVER_NAME',
    'SERVER_PORT', 'SERVER_ADDR', 'SERVER_PROTOCOL', 'REMOTE_ADDR', 'REMOTE_PORT', 'HTTPS',
    'HTTP_HOST', 'HTTP_X_CUSTOM', 'HTTP_COOKIE', 'PHP_SELF', 'GATEWAY_INTERFACE'];
$seen = [];
foreach ($keys as $key) {
    $seen[$key] = $_SERVER[$key] ?? null;
}
$seen['_GET'] = $_GET;
$seen['ini_memory_limit'] = ini_get('memory_limit');
$seen['env_APP_MODE'] = getenv('APP_MODE');
header('Content-Type: application/json');
echo json_encode($seen);
