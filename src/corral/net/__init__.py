"""Network addresses as corral's configuration names them, for every part that matches a peer."""
