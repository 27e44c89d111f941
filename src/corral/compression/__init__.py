"""Response compression: NGINX Unit's ``settings.http.compression``, as a step of the
response path.

- `corral.compression.codecs`: the content codings (gzip, deflate, br, zstd), the library
  and parameters each is made with (chosen by bench/compressors.py's figures), and one shape
  for all: `Codec.whole` for a body known in full, `Codec.stream` for one that comes in
  pieces, each piece flushed (`Encoder.feed`, `Encoder.finish`);
- `corral.compression.rules`: which answers are compressed with which coding, and what their
  fields become (`CompressionRules.decide` -> `Outcome`).

How the response path uses it, once a worker has made its rules (`build_rules`, None when the
listener's settings have no compression: then nothing of this runs)::

    # accept_encoding: the request's value, or its parsed header list (searched only if
    # needed); length: the body's, None when it streams; headers: (str, str) pairs
    outcome = rules.decide(method, status, headers, accept_encoding, length)
    if outcome is not None:
        headers = outcome.headers          # Vary, Content-Encoding, ETag...: send these
        if outcome.codec is not None:      # and compress the body:
            body = outcome.codec.whole(body)    # known in full: framed by len(body)
            # or, piece by piece: encoder = outcome.codec.stream(),
            # encoder.feed(piece) for each (skip b""), encoder.finish() at the end

Nothing here does I/O or imports a compression library before `build_rules` is called.
"""

from corral.compression.codecs import CODINGS, Codec, Encoder, check_compressor, make_codec
from corral.compression.rules import CompressionRules, Outcome, build_rules

__all__ = [
    "CODINGS",
    "Codec",
    "CompressionRules",
    "Encoder",
    "Outcome",
    "build_rules",
    "check_compressor",
    "make_codec",
]
