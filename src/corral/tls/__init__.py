"""TLS for corral's listeners: NGINX Unit's certificate store (`corral.tls.store`, bundles
parsed and checked by `corral.tls.bundle`), and the listeners' server contexts
(`corral.tls.context`), made in the master."""
