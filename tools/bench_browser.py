"""Submit-to-heatmap latency in a real browser, as JSON.

    python tools/bench_browser.py [--runs 10]

Starts `streamlit run app.py` on loopback, opens it in headless Chromium, and for each
run types a different sentence, presses Translate and waits until the heatmap's axis shows
the new sentence's last word. Prints the median and the worst time in milliseconds.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from browser import browser, exceptions, open_app, streamlit_server, translate_in_page  # noqa: E402

SENTENCES = [
    ("I went to the lecture.", "lecture."), ("Where is the nearest train station?", "station?"),
    ("She has a big black dog.", "dog."), ("I think it's going to rain tomorrow.", "tomorrow."),
    ("Tom didn't want to go to school today.", "today."), ("My grandmother lives near the sea.", "sea."),
    ("Can you help me carry this box?", "box?"), ("The children are playing in the garden.", "garden."),
    ("He forgot his keys at the office again.", "again."), ("Please turn off the lights.", "lights."),
]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--width", type=int, default=1400)
    p.add_argument("--height", type=int, default=1000)
    a = p.parse_args()
    times = []
    with streamlit_server() as url, browser() as b:
        page = open_app(b, url, a.width, a.height)
        for i in range(a.runs):
            text, last = SENTENCES[i % len(SENTENCES)]
            if i >= len(SENTENCES):
                text, last = f"{text[:-1]} again{text[-1]}", f"again{text[-1]}"
            times.append(translate_in_page(page, text, last))
        errors = exceptions(page)
    print(json.dumps({"submit_to_heatmap_ms_p50": round(statistics.median(times), 1),
                      "submit_to_heatmap_ms_max": round(max(times), 1), "runs": len(times),
                      "exceptions": len(errors)}))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
