<?php
header('Location: /index.php?from=redirect');
