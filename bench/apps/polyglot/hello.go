// The seed article's Go hello, with the standard library in place of Unit's unit.nginx.org/go:
// it serves on the socket the supervisor hands it (descriptor 3, LISTEN_FDS), as corral's
// "go" type runs it, or on PORT.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "Hello, Go on corral!\n")
	})
	var listener net.Listener
	var err error
	if os.Getenv("LISTEN_FDS") != "" {
		listener, err = net.FileListener(os.NewFile(3, "LISTEN_FDS"))
	} else {
		listener, err = net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	http.Serve(listener, nil)
}
