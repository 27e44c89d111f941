<?php
sleep((int)($_GET['seconds'] ?? 3));
echo "late\n";
