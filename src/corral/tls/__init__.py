"""TLS: the server contexts of HTTPS listeners (`corral.tls.context`), made in the master."""
