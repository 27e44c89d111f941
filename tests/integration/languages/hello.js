// The seed article's Node.js "Hello, Unit!", with Node's own http module in place of Unit's
// unit-http: it listens on the socket corral hands over (descriptor 3, LISTEN_FDS).
require("http")
  .createServer((request, response) => {
    response.writeHead(200, { "Content-Type": "text/plain" });
    response.end("Hello, Unit!\n");
  })
  .listen({ fd: 3 });
