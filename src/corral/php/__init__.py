"""NGINX Unit's ``"php"`` applications, run by php-fpm: which script answers a request
(`site`), the php-fpm pool corral writes and the command that runs it (`fpm`). The request
reaches php-fpm through the FastCGI action (`corral.actions.fastcgi`)."""
