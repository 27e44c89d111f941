"""hello.py's application behind WhiteNoise, serving bench/out/site/static under /static/
(bench/run.py's scenario S writes the files there), as a Flask or Django site serves its files
under Gunicorn today: the files found once at start (autorefresh off, WhiteNoise's production
setting) and a max-age of 24 hours, as the other servers of the scenario send."""

from pathlib import Path

from hello import application as hello
from whitenoise import WhiteNoise

FILES = Path(__file__).resolve().parents[1] / "out" / "site" / "static"

application = WhiteNoise(hello, root=FILES, prefix="/static/", autorefresh=False, max_age=86400)
