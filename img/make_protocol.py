"""Draws img/wap_protocol.png, the exactly-once publish protocol shown in the README."""
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch


def box(ax, x, y, text, color, w=2.6, h=1.1):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.05",
                                fc=color, ec="#333333", lw=1.1))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5)


def arrow(ax, a, b, label=None, color="#333333", dx=0.0, dy=0.12, ha="center"):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=13, lw=1.2, color=color,
                                 connectionstyle="arc3,rad=0"))
    if label:
        ax.text((a[0] + b[0]) / 2 + dx, (a[1] + b[1]) / 2 + dy, label, fontsize=7.5, color=color,
                ha=ha, va="bottom")


fig, ax = plt.subplots(figsize=(13, 7.2))
ax.set_xlim(0, 17)
ax.set_ylim(0, 9.9)
ax.axis("off")
blue, amber, green, red, grey = "#e8f0fe", "#fff4e5", "#e6f4ea", "#fce8e6", "#f1f3f4"

box(ax, 1.6, 6.4, "Run starts\nrun id, batch id,\ninput + config\nfingerprints", blue, h=1.3)
box(ax, 5.0, 6.4, "Already on main?\nmain's history\n+ run ledger\n(survives expiry)", grey, h=1.3)
box(ax, 8.6, 6.4, "Stage\nprivate branch\naudit_<batch>_<run>\nat main's snapshot", amber, h=1.3)
box(ax, 12.1, 6.4, "Guard (by run id)\nour snapshot heads\nour branch?", amber, h=1.3)
box(ax, 15.3, 6.4, "Audit\nthe staged\nsnapshot", amber, h=1.3)
box(ax, 13.5, 8.9, "our write on main (WAP off): undone by compare-and-swap, exit 1\n"
    "a blocking check fails: audit_failed, exit 3, branch kept", red, w=6.6, h=0.9)
box(ax, 15.3, 3.6, "Decide\nfrom fresh metadata\n(one function)", grey, h=1.2)
box(ax, 11.2, 3.6, "Compare-and-swap\nmain := staged snapshot,\nonly if main is still its parent\n"
    "(metadata commit on a checked base)", green, w=3.4, h=1.4)
box(ax, 11.2, 1.0, "Rebase (append): re-commit the audited\nfiles on the new main, re-run unique/volume.\n"
    "Restage (other modes)", amber, w=3.8, h=1.2)
box(ax, 15.3, 1.0, "already_published\nexit 0, main untouched", grey, w=2.8)
box(ax, 7.2, 3.6, "published\nthis run's branch dropped\nin the same commit", green, w=2.6, h=1.2)
box(ax, 3.6, 3.6, "Run ledger row\n<table>_wap_runs\n(every run; a lost row is\nbackfilled from main's history)",
    blue, w=3.2, h=1.4)

arrow(ax, (2.9, 6.4), (3.7, 6.4))
arrow(ax, (6.3, 6.4), (7.3, 6.4), "no")
arrow(ax, (9.9, 6.4), (10.8, 6.4))
arrow(ax, (13.4, 6.4), (14.0, 6.4), "yes")
arrow(ax, (12.1, 7.05), (12.1, 8.45), "no", "#d93025", dx=0.1, dy=-0.2, ha="left")
arrow(ax, (15.3, 7.05), (15.3, 8.45), "fails", "#d93025", dx=0.1, dy=-0.2, ha="left")
arrow(ax, (15.3, 5.75), (15.3, 4.2), "all blocking\nchecks pass", "#1e8e3e", dx=0.1, ha="left")
arrow(ax, (14.0, 3.6), (12.9, 3.6), "main = parent", "#1e8e3e", dy=0.1)
arrow(ax, (15.3, 3.0), (15.3, 1.5), "batch on main", dx=0.1, ha="left")
arrow(ax, (15.0, 3.0), (13.15, 0.9), "main moved /\nrolled back", dx=0.2, dy=0.05, ha="left")
arrow(ax, (12.4, 1.65), (14.2, 3.0), "retry", "#555555", dx=-0.3, dy=0.0, ha="right")
arrow(ax, (12.2, 4.3), (14.6, 4.2), "base changed: decide again", "#555555", dy=0.15)
arrow(ax, (9.5, 3.6), (8.5, 3.6), "swapped", "#1e8e3e", dy=0.1)
arrow(ax, (5.9, 3.6), (5.2, 3.6))
arrow(ax, (5.0, 5.75), (4.2, 4.3), "yes: already_published", dx=-0.15, ha="right")
ax.text(8.5, 0.05, "Every snapshot a run commits carries wap.run_id, wap.batch_id, wap.input_fingerprint and "
        "wap.config_fingerprint. Only the audited snapshot id is ever swapped into main.",
        ha="center", fontsize=8, style="italic", color="#555555")
ax.set_title("wap_etl: exactly-once publish", fontsize=12)
fig.tight_layout()
fig.savefig(os.path.join(os.path.dirname(os.path.abspath(__file__)), "wap_protocol.png"), dpi=110)
