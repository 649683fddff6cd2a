"""A classroom at once: many concurrent real Streamlit sessions translating different sentences.

    python tools/load_test.py --sessions 20 --seconds 60

Starts `streamlit run app.py` on loopback and opens --sessions concurrent sessions over
Streamlit's own websocket protocol (what a browser tab speaks: BackMsg / ForwardMsg
protobufs on /_stcore/stream). Each session opens the Translate page once, then keeps
typing a new sentence into its text box and pressing Translate (the widget states a
browser sends), reads the translation the server renders, and checks it against the same
model's greedy translation computed here: a wrong or missing answer (cross-talk between
sessions, an exception, a warning) is an error.
Between requests a session waits 1-3 s (--think), as a student reading the answer would.
Prints JSON: requests, errors, latency p50/p95/max (ms, from the request to the rendered
translation; page_p50/p95_ms: until the whole page has run), the server's CPU time per
request, and its resident memory after warm-up and at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import random
import re
import sys
import time
import urllib.parse
from pathlib import Path

import numpy as np
import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from browser import streamlit_server  # noqa: E402
from s2s.checkpoint import checkpoint_root, load_translator  # noqa: E402
from s2s.decode import greedy  # noqa: E402

WHO = ["My brother", "The teacher", "Her neighbour", "Our doctor", "The little girl", "His father", "The old man",
       "My best friend", "The new student", "Their cat"]
DOES = ["reads a book", "drinks coffee", "walks to school", "sings a song", "cooks dinner", "writes a letter",
        "plays the piano", "watches the birds", "buys some bread", "cleans the kitchen"]
WHEN = ["every morning", "on Sundays", "after work", "before breakfast", "in the garden", "at night", "in winter",
        "with a smile", "near the river", "every day"]
PAGE = "translate"   # the page's URL path (/translate): the app opens on Start here
PAGE_MAX_LEN = 120   # the Translate page's default max length (pages/translate.py DEFAULTS)
TRANSLATION = re.compile(r"<div class='s2s-text'[^>]*>(.*?)</div>", re.S)


def sentences(n: int, seed: int = 0) -> list[str]:
    """n different sentences (1,000 possible), so the page's result cache cannot answer them."""
    rng = random.Random(seed)
    combos = [f"{w} {d} {t}." for w in WHO for d in DOES for t in WHEN]
    rng.shuffle(combos)
    return combos[:n]


def processes(pid: int) -> list[int]:
    return [pid] + [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the server has used so far."""
    total = 0
    for p in processes(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except FileNotFoundError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the streamlit server), in MB."""
    total = 0
    for p in processes(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total / 1024


class Tab:
    """One browser tab on the Translate page, over Streamlit's websocket protocol: it opens
    the page once, then types each sentence into the "English text" box and presses
    Translate (the widget states a browser would send), on the same session."""

    def __init__(self, url: str, model: str, timeout: float):
        self.url, self.model, self.timeout = url, model, timeout
        self.ws = None
        self.text_id = self.submit_id = None

    async def open(self) -> None:
        self.ws = await websockets.connect(self.url.replace("http://", "ws://") + "/_stcore/stream",
                                           subprotocols=["streamlit"], max_size=2**26, open_timeout=self.timeout)
        await self._run(ClientState(query_string=urllib.parse.urlencode({"model": self.model}), page_name=PAGE))
        if not (self.text_id and self.submit_id):
            raise RuntimeError("the Translate page has no English text box or Translate button")

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def translate(self, text: str) -> tuple[str | None, list[str], float, float]:
        """Type `text`, press Translate; return the rendered translation, the exceptions and
        warnings shown, and the seconds until the translation arrived and the run ended."""
        widgets = WidgetStates(widgets=[WidgetState(id=self.text_id, string_value=text),
                                        WidgetState(id=self.submit_id, trigger_value=True)])
        return await self._run(ClientState(query_string=urllib.parse.urlencode({"model": self.model}),
                                           page_name=PAGE, widget_states=widgets))

    async def _run(self, state: ClientState):
        t0 = time.perf_counter()
        t_answer, translation, problems = float("nan"), None, []
        await self.ws.send(BackMsg(rerun_script=state).SerializeToString())
        deadline = time.monotonic() + self.timeout
        while True:
            raw = await asyncio.wait_for(self.ws.recv(), timeout=max(0.1, deadline - time.monotonic()))
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                el = msg.delta.new_element
                which = el.WhichOneof("type")
                if which == "markdown" and translation is None:
                    m = TRANSLATION.search(el.markdown.body)
                    if m:
                        translation = html.unescape(m.group(1))
                        t_answer = time.perf_counter() - t0
                elif which == "text_area" and el.text_area.label == "English text":
                    self.text_id = el.text_area.id
                elif which == "button" and el.button.label == "Translate":
                    self.submit_id = el.button.id
                elif which == "exception":
                    problems.append(f"exception: {el.exception.message}")
                elif which == "alert" and el.alert.format in (1, 2):     # ERROR, WARNING
                    problems.append(f"alert: {el.alert.body[:200]}")
            elif kind == "script_finished" and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                # (a server's first run reruns itself through app.py: ui.address.run_through_app; wait for that run)
                return translation, problems, t_answer, time.perf_counter() - t0


async def run(url: str, sessions: int, seconds: float, model: str, expected: dict[str, str], timeout: float,
              pid: int | None, think: tuple[float, float]) -> dict:
    texts = list(expected)
    latencies, pages, errors, examples, counter = [], [], 0, [], iter(range(10**9))
    rng = random.Random(1)
    rss = {}
    cpu_start = cpu_s(pid) if pid else None
    t_end = time.monotonic() + seconds

    async def user(k: int) -> None:
        nonlocal errors
        tab = Tab(url, model, timeout)
        try:
            await tab.open()
        except Exception as e:
            errors += 1
            examples.append({"session": k, "problems": [f"could not open the page: {type(e).__name__}: {e}"]})
            return
        try:
            while time.monotonic() < t_end:
                text = texts[next(counter) % len(texts)]
                t = time.perf_counter()
                try:
                    got, problems, answer_s, page_s = await tab.translate(text)
                except Exception as e:    # a dropped connection or a timeout is an error too
                    got, problems = None, [f"{type(e).__name__}: {e}"]
                    answer_s = page_s = time.perf_counter() - t
                latencies.append(answer_s * 1000)
                pages.append(page_s * 1000)
                if problems or got != expected[text]:
                    errors += 1
                    if len(examples) < 5:
                        examples.append({"text": text, "expected": expected[text], "got": got, "problems": problems})
                await asyncio.sleep(rng.uniform(*think))     # a student reads the answer before the next one
        finally:
            await tab.close()

    async def warmed() -> None:
        await asyncio.sleep(min(10.0, seconds / 4))
        if pid:
            rss["after_warmup"] = round(rss_mb(pid), 1)

    await asyncio.gather(warmed(), *(user(k) for k in range(sessions)))
    if pid:
        rss["end"] = round(rss_mb(pid), 1)
        server_cpu = cpu_s(pid) - cpu_start

    def pct(values: list[float], q: float) -> float | None:
        finite = [v for v in values if v == v]           # requests that failed have no answer time
        return round(float(np.percentile(finite, q)), 1) if finite else None

    out = {"sessions": sessions, "seconds": seconds, "think_s": list(think), "requests": len(latencies),
           "repeated_sentences": max(0, len(latencies) - len(texts)), "errors": errors,
           "p50_ms": pct(latencies, 50), "p95_ms": pct(latencies, 95), "max_ms": pct(latencies, 100),
           "page_p50_ms": pct(pages, 50), "page_p95_ms": pct(pages, 95), "error_examples": examples}
    if rss:
        out["rss_mb_after_warmup"] = rss.get("after_warmup")
        out["rss_mb_end"] = rss.get("end")
        out["server_cpu_ms_per_request"] = round(1000 * server_cpu / max(1, len(latencies)), 1)
        if rss.get("after_warmup"):
            out["rss_growth_pct"] = round(100 * (rss["end"] / rss["after_warmup"] - 1), 1)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--model", default="en-fr-additive")
    p.add_argument("--sentences", type=int, default=1000,
                   help="distinct sentences (at most 1,000), sent in turn: with more than requests, none repeats")
    p.add_argument("--timeout", type=float, default=60, help="seconds before one request counts as failed")
    p.add_argument("--think", type=float, nargs=2, default=(1.0, 3.0), metavar=("MIN", "MAX"),
                   help="seconds a session waits between requests (uniform)")
    p.add_argument("--warmup", type=int, default=1, help="requests sent (and not timed) before the test")
    p.add_argument("--url", help="test a server that is already running instead of starting one")
    p.add_argument("--pid", type=int, help="with --url: that server's process id, for its CPU and memory figures "
                                           "(e.g. another checkout's server, to compare)")
    a = p.parse_args(argv)
    tr = load_translator(checkpoint_root() / a.model)
    texts = sentences(a.sentences)
    expected = {t: greedy(tr, t, max_len=PAGE_MAX_LEN).translation for t in texts}
    think = tuple(a.think)

    def test(url: str, pid: int | None) -> dict:
        async def warm_up():                            # the first run imports torch and loads the models
            tab = Tab(url, a.model, 300)
            await tab.open()
            for text in sentences(a.warmup, seed=99):
                await tab.translate(text)
            await tab.close()
        asyncio.run(warm_up())
        return asyncio.run(run(url, a.sessions, a.seconds, a.model, expected, a.timeout, pid, think))

    if a.url:
        result = test(a.url, a.pid)
    else:
        with streamlit_server(dict(os.environ), with_process=True) as (url, proc):
            result = test(url, proc.pid)
    print(json.dumps(result))
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
