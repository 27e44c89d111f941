"""FastCGI: the records (`records`), the CGI answer's head (`answer`), the variables a
request gives a FastCGI application (`params`), and the client that talks to php-fpm from a
worker's loop (`client`). Only `client` does I/O."""
