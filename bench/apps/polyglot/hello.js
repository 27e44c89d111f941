// The seed article's Node.js hello, without Unit's unit-http: Node's own http server on the
// socket the supervisor hands it (descriptor 3, LISTEN_FDS) or on PORT.
const http = require("http");
const server = http.createServer((req, res) => {
    res.writeHead(200, {"Content-Type": "text/plain"});
    res.end("Hello, Node.js on corral!\n");
});
server.keepAliveTimeout = 75000;
if (process.env.LISTEN_FDS) {
    server.listen({fd: 3});
} else {
    server.listen(Number(process.env.PORT), "127.0.0.1");
}
