"""Where the Heads tab's time goes on a large model, and the head overview's A/B, as JSON.

    python tools/head_overview_speed.py --model DIR [--max-len 24] [--runs 2] [--app OLD --app .]

DIR: a Hugging Face model folder (e.g. the opus-mt-en-fr-shaped stand-in of tests/hub_models.py:
marian(DIR, OPUS_MT_EN_FR, OPUS_MT_EN_FR_VOCAB), random weights), listed to the app by
S2S_HUB_MODELS. Parts, each the median over --runs:

    decode_ms            greedy decoding of the sentence, --max-len pieces at most (a random model
                         never stops on its own), as the page decodes it
    decode_masked_ms     the same with one cross-attention head knocked out (a knock-out click's decoding)
    grid_figure_ms       every layer x head as small maps (s2s.figures.heads_grid, for_screen): what
                         the tab built before the head overview, for one kind
    overview_figure_ms   what it builds now for one kind: the statistics (s2s.head_stats), the
                         matrix (s2s.figures.head_matrix) and one layer's small maps
    heads_tab_ms         (browser, per --app) the Heads tab clicked, the sentence decoded already,
                         until its run is over and every chart drawn
    knock_mode_ms        "Click: knock out" until the knockout's view has settled
    knock_click_ms       a click on a head not yet knocked out (a mask never decoded: no cache)
                         until the translation beside it shows the knockout

Each --app (a checkout; OLD e.g. from `git archive COMMIT | tar -x -C /tmp/old`) gets a fresh
server per run, the checkouts alternated, so that a loaded machine weighs on both alike.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
TEXT = "the cat sat on the mat ."
# a head's centre in the knockout's click target: the matrix's cell, or (a checkout before the head
# overview) the small map's plot area
CELL = """([layer, head, heads]) => {
  const g = document.querySelector('.st-key-knockout_grid .js-plotly-plot'), f = g._fullLayout;
  const r = g.getBoundingClientRect();
  if (!f.xaxis2) return [r.left + f.xaxis._offset + f.xaxis.l2p(head), r.top + f.yaxis._offset + f.yaxis.l2p(layer)];
  const n = layer * heads + head + 1, sub = n === 1 ? 'xy' : `x${n}y${n}`;
  const e = g.querySelector(`.draglayer .${sub} .nsewdrag`).getBoundingClientRect();
  return [e.left + e.width / 2, e.top + e.height / 2]; }"""
ANSWER = ".st-key-point_knockout_answer"


def ms(f, runs: int) -> float:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        out.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(out), 1)


def parts(model: str, max_len: int, runs: int) -> dict:
    from s2s import figures
    from s2s.checkpoint import load_translator
    from s2s.decode import DecodeSettings, attention_heads, decode
    from s2s.head_stats import eos_key, head_statistics
    tr = load_translator(model)
    d = decode(tr, TEXT, DecodeSettings("greedy", max_len=max_len))
    x, y, w = attention_heads(d, "cross")
    L, H = w.shape[:2]

    def overview() -> None:
        for metric in ("confidence", "agreement"):
            v = head_statistics(w, eos_key(x), d.attention, which=(metric,))[metric]
        figures.for_screen(figures.head_matrix(v, metric, width=490))
        figures.for_screen(figures.heads_grid(w[L - 1].reshape(-1, min(H, 8), *w.shape[2:]), x, y, width=760,
                                              height=480), width=820)
    return {"shape": f"{L} x {H}", "pieces": len(d.target_tokens),
            "decode_ms": ms(lambda: decode(tr, TEXT, DecodeSettings("greedy", max_len=max_len)), runs),
            "decode_masked_ms": ms(lambda: decode(tr, TEXT, DecodeSettings("greedy", max_len=max_len,
                                                                          head_mask="cross:1.1")), runs),
            "grid_figure_ms": ms(lambda: figures.for_screen(figures.heads_grid(w, x, y, width=760, height=480),
                                                            width=492), runs),
            "overview_figure_ms": ms(overview, runs)}


def browser_run(b, url: str, model: str, max_len: int, L: int, H: int) -> dict:
    from browser import settle, watched_page
    page = watched_page(b, 1280, 720)
    page.goto(f"{url}/translate?model={model}&text={TEXT.replace(' ', '+')}&maxlen={max_len}&tab=Beam+tree")
    page.wait_for_selector(".js-plotly-plot >> visible=true", timeout=600_000)
    settle(page, 600_000)
    out = {}
    t = time.perf_counter()
    page.get_by_role("tab", name="Heads").click()
    page.wait_for_selector(".st-key-heads_grid .main-svg", timeout=600_000)
    settle(page, 600_000)
    out["heads_tab_ms"] = (time.perf_counter() - t) * 1000 - 1000       # settle waits 1 s of quiet
    t = time.perf_counter()
    page.locator(".st-key-heads_click button", has_text="Click: knock out").click()
    page.wait_for_selector(".st-key-knockout_grid .main-svg", timeout=600_000)
    settle(page, 600_000)
    out["knock_mode_ms"] = (time.perf_counter() - t) * 1000 - 1000
    x, y = page.evaluate(CELL, [0, 1, H])
    t = time.perf_counter()
    page.mouse.click(x, y)
    page.wait_for_function(f"() => !(document.querySelector('{ANSWER}') || {{}}).innerText?.includes('No head')",
                           timeout=600_000)
    settle(page, 600_000)
    out["knock_click_ms"] = (time.perf_counter() - t) * 1000 - 1000
    page.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--max-len", type=int, default=24)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--app", action="append", default=[])
    p.add_argument("--no-parts", action="store_true", help="the browser's A/B only")
    a = p.parse_args(argv)
    result = {} if a.no_parts else parts(a.model, a.max_len, max(3, a.runs))
    if a.app:
        from browser import browser, streamlit_server
        from s2s.checkpoint import load_translator
        from s2s.hooks import head_counts
        L, H = head_counts(load_translator(a.model).model)["cross"]
        times: dict[str, dict[str, list[float]]] = {app: {} for app in a.app}
        for _ in range(a.runs):
            for app in a.app:
                with streamlit_server({"S2S_HUB_MODELS": a.model}, app=Path(app), timeout=300) as url, \
                        browser() as b:
                    for k, v in browser_run(b, url, a.model, a.max_len, L, H).items():
                        times[app].setdefault(k, []).append(v)
        result["browser"] = {app: {k: round(statistics.median(v)) for k, v in t.items()} for app, t in times.items()}
        if len(a.app) == 2:
            old, new = (result["browser"][app] for app in a.app)
            result["ratio_new_over_old"] = {k: round(new[k] / old[k], 2) for k in new if old.get(k)}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
