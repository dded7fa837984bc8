"""Draws img/wap_flow.png, the Write-Audit-Publish flow shown in the README."""
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch


def box(ax, x, y, text, color, w=2.3, h=1.0):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.05",
                                fc=color, ec="#333333", lw=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=9, wrap=True)


def arrow(ax, a, b, label=None, color="#333333"):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=14, lw=1.3, color=color))
    if label:
        ax.text((a[0] + b[0]) / 2 - 0.15, (a[1] + b[1]) / 2, label, fontsize=8, color=color,
                ha="right", va="center")


fig, ax = plt.subplots(figsize=(12, 4.2))
ax.set_xlim(0, 15.5)
ax.set_ylim(0.6, 5.2)
ax.axis("off")
box(ax, 1.4, 3.6, "Read batch\nCSV / JSON / Parquet\n+ transform(df)", "#e8f0fe")
box(ax, 4.3, 3.6, "Write\nappend to branch\naudit_<batch_id>\n(spark.wap.branch)", "#fff4e5", h=1.3)
box(ax, 7.2, 3.6, "Audit\nchecks on the staged\nrows: one scan", "#fff4e5")
box(ax, 10.4, 4.4, "Publish\nfast_forward main\nto the branch,\ndrop the branch", "#e6f4ea", h=1.3)
box(ax, 10.4, 1.6, "Fail\nmain untouched,\nbranch kept,\nreport + alert, exit 3", "#fce8e6", h=1.3)
box(ax, 13.8, 4.4, "Consumers read main:\nonly audited data", "#e6f4ea", w=2.6)
box(ax, 13.8, 1.6, "Inspect:\nSELECT ... VERSION\nAS OF 'audit_<id>'", "#f1f3f4", w=2.6)
arrow(ax, (2.6, 3.6), (3.1, 3.6))
arrow(ax, (5.5, 3.6), (6.0, 3.6))
arrow(ax, (8.4, 3.8), (9.2, 4.3), "all blocking\nchecks pass", "#1e8e3e")
arrow(ax, (8.4, 3.4), (9.2, 1.9), "a blocking\ncheck fails", "#d93025")
arrow(ax, (11.6, 4.4), (12.5, 4.4))
arrow(ax, (11.6, 1.6), (12.5, 1.6))
ax.text(4.3, 2.4, "main does not move while\nthe batch is staged", ha="center", fontsize=8,
        style="italic", color="#555555")
ax.set_title("wap_etl: Write - Audit - Publish on an Iceberg table", fontsize=12)
fig.tight_layout()
fig.savefig(os.path.join(os.path.dirname(os.path.abspath(__file__)), "wap_flow.png"), dpi=110)
