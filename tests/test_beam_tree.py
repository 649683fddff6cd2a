"""The beam tree drawn as a tree (s2s.figures.beam_tree_figure): its edges, its n-best paths,
its labels, and user text in it shown as text."""
import html

import pytest

from s2s.decode import beam_search
from s2s.figures import NBEST_STYLES, _place_labels, _text_em, beam_paths, beam_tree_figure


def trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def node_xy(fig) -> dict[int, tuple[float, float]]:
    """Tree node -> its (x, y) as drawn (node -1 is the root <s>)."""
    nodes = trace(fig, "hypotheses")
    return {int(n): (x, y) for n, x, y in zip(nodes.customdata, nodes.x, nodes.y)}


@pytest.fixture(scope="module")
def decoding(tiny_additive):
    from s2s.checkpoint import load_translator
    return beam_search(load_translator(tiny_additive), "a b c d e f", width=5, n_best=3)


def test_one_edge_per_node_from_its_parent(decoding):
    tree = decoding.beam_tree
    fig = beam_tree_figure(tree, [h.node for h in decoding.nbest])
    xy = node_xy(fig)
    assert len(xy) == len(tree) + 1                                       # every node and the root
    edges = trace(fig, "every hypothesis kept")
    assert len(edges.x) == len(edges.y) == 3 * len(tree)                  # (parent, child, gap) per node
    for n, node in enumerate(tree):
        x0, y0, x1, y1 = edges.x[3 * n], edges.y[3 * n], edges.x[3 * n + 1], edges.y[3 * n + 1]
        assert (x0, y0) == xy[node["parent"]] and (x1, y1) == xy[n]
        assert edges.x[3 * n + 2] is None
        assert x1 == node["step"] + 1 and x1 == x0 + 1                    # x = step, one step per edge
    # y is the rank within the step: each step's nodes take 0, 1, 2, ... in beam_search's order
    for step in {node["step"] for node in tree}:
        assert sorted(xy[n][1] for n, node in enumerate(tree) if node["step"] == step) == \
               list(range(sum(node["step"] == step for node in tree)))


def test_nbest_paths_are_highlighted_and_match_the_decoding(decoding):
    tree, nbest = decoding.beam_tree, decoding.nbest
    assert len(nbest) == 3
    fig = beam_tree_figure(tree, [h.node for h in nbest])
    xy = node_xy(fig)
    names = ["#1, the best"] + [f"#{k + 1}" for k in range(1, len(nbest))]
    styles = set()
    for k, (name, h) in enumerate(zip(names, nbest)):
        path = trace(fig, name)
        nodes = beam_paths(tree, [h.node])[0]
        assert [tree[n]["token"] for n in nodes] == h.tokens                 # the hypothesis, token by token
        assert list(zip(path.x, path.y)) == [xy[-1]] + [xy[n] for n in nodes]  # drawn from the root along it
        styles.add((path.line.color, path.line.width))
        assert (path.line.color, path.line.width) == NBEST_STYLES[k]
    edges = trace(fig, "every hypothesis kept")
    assert len(styles) == len(nbest) and (edges.line.color, edges.line.width) not in styles
    assert max(w for _, w in styles) == NBEST_STYLES[0][1] and edges.line.width < min(w for _, w in styles)
    # the winner is drawn last (on top) and is the decoding's own output
    paths = [t for t in fig.data if (t.name or "").startswith("#")]
    assert paths[-1].name == "#1, the best"
    assert [tree[n]["token"] for n in beam_paths(tree, [nbest[0].node])[0]] == decoding.target_tokens


def test_only_nbest_tokens_are_written_next_to_their_node(decoding):
    tree, nbest = decoding.beam_tree, decoding.nbest
    fig = beam_tree_figure(tree, [h.node for h in nbest])
    xy = node_xy(fig)
    labels = trace(fig, "labels")
    on_paths = {n for path in beam_paths(tree, [h.node for h in nbest]) for n in path}
    assert len(labels.text) >= 2 and labels.customdata[0] == -1 and labels.text[0] == "&lt;s&gt;"
    for n, x, y, text in zip(labels.customdata, labels.x, labels.y, labels.text):
        assert n == -1 or (n in on_paths and text == html.escape(tree[n]["token"], quote=False))
        assert x == xy[n][0] and 0 < abs(y - xy[n][1]) < 1       # above or below its own node, within its row
    hover = trace(fig, "hypotheses").hovertext
    assert all(f"log p(prefix) = {node['log_prob']:.3f}" in hover[n + 1] for n, node in enumerate(tree))


def boxes(candidates, places, px_x, px_y):
    """The pixel boxes of placed labels, as _place_labels sees them."""
    out = []
    for (x, y, text), place in zip(candidates, places):
        if place:
            dy, size = place
            half, h = (_text_em(text) * size + 4) / 2, 1.25 * size
            out.append((x * px_x - half, y * px_y + dy - h / 2, x * px_x + half, y * px_y + dy + h / 2))
    return out


def test_label_placement_never_overlaps():
    # four labels on one point of a lower row: above, below, then no room left (hover only)
    places = _place_labels([(0, 2, "abc")] * 4, 30, 50, 13)
    assert [p[0] < 0 if p else None for p in places] == [True, False, None, None]
    # the top row has a second line above it
    assert sum(p is not None for p in _place_labels([(0, 0, "abc")] * 4, 30, 50, 13)) == 3
    # far-apart short labels all go just above, at full size
    just_above = (-0.55 * 13 - 1.25 * 13 / 2, 13)
    assert set(_place_labels([(x, 1, "▁la") for x in range(0, 30, 3)], 30, 50, 13)) == {just_above}
    # a crowded path: whatever is placed never overlaps
    words = ["▁Ma", "▁grand", "-", "mère", "▁m", "'", "a", "▁dit", "▁visite", "▁la", "▁semaine", "▁prochaine"]
    words *= 3
    cands = [(x, (x // 4) % 3, w) for x, w in enumerate(words)]
    placed = boxes(cands, _place_labels(cands, 24, 50, 13), 24, 50)
    assert len(placed) > len(cands) // 2
    assert all(a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
               for i, a in enumerate(placed) for b in placed[i + 1:])
    assert _text_em("▁M") > _text_em("il")


def test_tokens_show_as_text_escaped_exactly_once():
    """A piece with quotes, tags and an entity is written as it is: escaped once for plotly
    (which renders a subset of HTML), never twice (&quot;, &amp;amp; for a plain &)."""
    hostile = '"<b>x</b>&amp;'
    tree = [dict(step=0, token=hostile, log_prob=-0.1, parent=-1, finished=False),
            dict(step=0, token="▁y", log_prob=-2.0, parent=-1, finished=False),
            dict(step=1, token="</s>", log_prob=-0.3, parent=0, finished=True)]
    fig = beam_tree_figure(tree, [2])
    once = '"&lt;b&gt;x&lt;/b&gt;&amp;amp;'
    labels = list(trace(fig, "labels").text)
    assert labels.count(once) == 1 and "&lt;/s&gt;" in labels and "&lt;s&gt;" in labels
    hover = trace(fig, "hypotheses").hovertext
    assert once in hover[1] and "finished (&lt;/s&gt;)" in hover[3]
    shown = " ".join(labels + list(hover))
    assert "&quot;" not in shown and "&amp;lt;" not in shown and "<b>x" not in shown
    assert "▁y" not in labels                    # not on the n-best path: hover only


def test_paths_beyond_the_fifth_share_one_dashed_style_and_legend_entry():
    tree = [dict(step=0, token=f"t{k}", log_prob=-k, parent=-1, finished=False) for k in range(7)]
    tree += [dict(step=1, token="</s>", log_prob=-k - 1, parent=k, finished=True) for k in range(7)]
    fig = beam_tree_figure(tree, list(range(7, 14)))
    paths = [t for t in fig.data if t.mode == "lines" and t.name != "every hypothesis kept"]
    assert len(paths) == 7
    styled = [t for t in paths if t.line.dash == "solid"]
    rest = [t for t in paths if t.line.dash == "dash"]
    assert len({(t.line.color, t.line.width) for t in styled}) == 5 and len(rest) == 2
    assert {t.name for t in rest} == {"#6–#7"} and sum(t.showlegend is not False for t in rest) == 1
