"""NGINX Unit's ``share`` action, served the way nginx serves files.

`corral.static.files.StaticFiles` is the one entry: ``serve(share, request)`` takes a routed
`corral.routing.Share` and its `corral.routing.RouteRequest` and gives a
`corral.static.answer.StaticAnswer` (fields, and a body in memory or a descriptor range for
sendfile), synchronously, on the loop's thread. Nothing here touches a socket or the loop:
the share action writes the answer. This package imports nothing at its top so that routing
can import `corral.static.policy` (the share's fields, compiled with the routes) cheaply.
"""
