<?php
// a large answer in pieces: corral streams it while the client reads
$piece = str_repeat('0123456789abcdef', 4096);
for ($i = 0; $i < (int)($_GET['pieces'] ?? 64); $i++) {
    echo $piece;
    flush();
}
