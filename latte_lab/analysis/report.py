"""Paper-vs-recomputed comparison, and the tables and report.md that ``latte-lab figures`` writes beside the figures.

The paper's printed numbers live in ``latte_lab/data/paper_reference.csv`` (typed from the paper with their
section, unit, precision and, for the published numbers that a recomputation does not reproduce, the explanation); nothing in
this package hard-codes them. :func:`compare_with_paper` recomputes every referenced number from a
``TrialData`` and says whether it agrees at the paper's precision.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from latte_lab import data as bundled
from latte_lab import schema
from latte_lab.analysis import stats
from latte_lab.errors import DataError

REFERENCE_ENV = "LATTE_PAPER_REFERENCE"  # override of the reference CSV path
REFERENCE_FILE = "paper_reference.csv"  # bundled in latte_lab.data
REFERENCE_COLUMNS = ("id", "section", "quantity", "metric", "task", "team", "model", "value", "sem",
                     "paper_text", "unit", "scale", "decimals", "rule", "status", "explained_by",
                     "explanation")
STATS_5_1_COLUMNS = ["metric", "team", "n", "mean", "u", "p"]  # the fixed stats_5_1.csv form
FLOAT_TOLERANCE = 1e-9  # rounding/truncation comparisons of printed decimals


def paper_reference(path=None) -> pd.DataFrame:
    """The paper's printed numbers: ``path``, else $LATTE_PAPER_REFERENCE, else the table bundled with latte_lab."""
    explicit = path or os.environ.get(REFERENCE_ENV)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise DataError(f"paper reference table {path} not found; unset {REFERENCE_ENV} and pass no path to "
                            "use the table bundled with latte_lab")
        source = path
    else:
        path = f"latte_lab's bundled {REFERENCE_FILE}"
        source = io.StringIO(bundled.read_text(REFERENCE_FILE))
    ref = pd.read_csv(source, dtype=str, keep_default_na=False)
    missing = [c for c in REFERENCE_COLUMNS if c not in ref.columns]
    if missing:
        raise DataError(f"malformed {path}: missing columns {missing}")
    for col in ("value", "sem", "scale", "decimals"):
        ref[col] = pd.to_numeric(ref[col].replace("", np.nan), errors="coerce")
    return ref


def _agrees(computed: float, printed: float, decimals: int, rule: str) -> bool:
    if computed is None or pd.isna(computed) or pd.isna(printed):
        return False
    if rule == "less_than":
        return computed < printed
    rounded = float(f"{computed:.{decimals}f}")
    if rule == "round":
        return abs(rounded - printed) < FLOAT_TOLERANCE
    if rule == "round_or_truncate":
        factor = 10 ** decimals
        truncated = math.floor(computed * factor + FLOAT_TOLERANCE) / factor
        return min(abs(rounded - printed), abs(truncated - printed)) < FLOAT_TOLERANCE
    raise DataError(f"unknown comparison rule {rule!r} in the paper reference table")


def _fmt(x: float, decimals: int, rule: str = "") -> str:
    if x is None or pd.isna(x):
        return ""
    if rule == "less_than":
        return f"{x:.2g}"
    return f"{x:,.{int(decimals)}f}"


def _computed(data, tables: dict | None = None) -> dict[str, tuple[float, float]]:
    """{reference id: (value, sem)} recomputed from the data, in analysis units (fractions, counts,
    seconds). ``tables``: table2, stats_5_1 and section53 of the data, where the caller has them."""
    trials = data.trials if hasattr(data, "trials") else data
    tables = tables or {}
    out: dict[str, tuple[float, float]] = {}
    t2 = tables["table2"] if "table2" in tables else stats.table2(trials)
    for _, r in t2[t2["model"] == schema.ALL].iterrows():
        for metric, key in (("accuracy", "acc"), ("tokens", "tokens"), ("wall", "wall")):
            out[f"table2/{metric}/{r['task']}/{r['team']}"] = (r[f"{key}_mean"], r[f"{key}_sem"])
    s51 = tables["stats_5_1"] if "stats_5_1" in tables else stats.stats_5_1(trials)
    s53 = tables["section53"] if "section53" in tables else stats.section53(trials)
    for section, table in (("5.1", s51), ("5.3", s53)):
        for _, r in table.iterrows():
            out[f"{section}/{r['metric']}/{r['team']}/mean"] = (r["mean"], np.nan)
            out[f"{section}/{r['metric']}/{r['team']}/p"] = (r["p"], np.nan)
    return out


def compare_with_paper(data, reference: pd.DataFrame | None = None, *, tables: dict | None = None) -> pd.DataFrame:
    """Every number of the reference table beside its recomputed value.

    Columns id, section, metric, task, team, quantity, paper, ours, agrees, status, note. ``agrees`` is
    a nullable boolean: NA where the data cannot give the number. ``note`` says when a number cannot be
    computed from the data; on the published data it explains a known deviation (the ``explanation`` column of the paper reference table) and flags
    an unexpected mismatch. Own trials are expected to differ: their note says only whether they agree,
    and where the paper reference table explains the published number, adds that explanation as being about the
    published data. ``tables``: the data's ``table2``, ``stats_5_1`` and ``section53`` when the caller
    has computed them already.
    """
    ref = paper_reference() if reference is None else reference
    source = getattr(data, "source", "published")
    ours = _computed(data, tables)
    rows = []
    for _, r in ref.iterrows():
        value, sem = ours.get(r["id"], (np.nan, np.nan))
        scale, dec, rule = float(r["scale"]), int(r["decimals"]), r["rule"]
        v = value * scale if rule != "less_than" else value
        s = sem * scale if not pd.isna(sem) else np.nan
        agrees = _agrees(v, r["value"], dec, rule)
        if r["quantity"] == "mean_sem":
            agrees = agrees and _agrees(s, r["sem"], dec, rule)
        if pd.isna(v):
            agrees = pd.NA  # not computable from this data: neither agreement nor disagreement
            ours_text = ""
        elif r["quantity"] == "mean_sem" and not pd.isna(s):  # shown as the paper prints it: both are compared
            ours_text = f"{_fmt(v, dec)} ± {_fmt(s, dec)}"
        else:
            ours_text = _fmt(v, dec, rule)
        if pd.isna(v):
            note = r["explanation"] or "not computable from this data"
        elif source != "published":  # the table's explanations are about the published data, not these trials
            note = "agrees with the paper (own trials)" if agrees else "differs from the paper (own trials)"
            if r["status"] == "deviation" and r["explanation"]:
                note += f"; on the published data: {r['explanation']}"
        elif agrees:
            note = r["explanation"]
        elif r["status"] == "deviation":
            note = f"known deviation: {r['explanation']}"
        else:
            note = "UNEXPECTED mismatch with the paper"
        rows.append({"id": r["id"], "section": r["section"], "metric": r["metric"], "task": r["task"],
                     "team": r["team"], "quantity": r["quantity"], "paper": r["paper_text"], "ours": ours_text,
                     "agrees": agrees if agrees is pd.NA else bool(agrees), "status": r["status"], "note": note})
    out = pd.DataFrame(rows)
    if len(out):
        out["agrees"] = out["agrees"].astype("boolean")  # NA where the data cannot give the number
    return out


# --- display ---------------------------------------------------------------------------------------

P_COLUMNS = ("p", "p_holm", "p_value", "pvalue", "p_raw", "pr(>f)")  # shown as <0.001 or 3 significant digits
P_FLOOR = 0.001
NUMERIC_NOISE = 1e-9  # a float this close to zero is zero (floating-point noise, e.g. a centred mean)
NOT_AVAILABLE = "n/a"


def format_p(p) -> str:
    """A p-value as a paper prints it.

    >>> format_p(0.0000123), format_p(0.04567), format_p(float("nan"))
    ('<0.001', '0.0457', 'n/a')
    """
    if p is None or pd.isna(p):
        return NOT_AVAILABLE
    return f"<{P_FLOOR:g}" if p < P_FLOOR else f"{p:.3g}"


def format_number(x) -> str:
    """A table number: 3 significant digits, thousands separated, n/a when missing.

    >>> format_number(4.336162e-17), format_number(0.123456), format_number(123456.7), format_number(None)
    ('0', '0.123', '123,457', 'n/a')
    """
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
        return NOT_AVAILABLE
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    x = float(x)
    if abs(x) < NUMERIC_NOISE:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def formatted(df: pd.DataFrame):
    """``df`` ready to read in a notebook: p-values as ``<0.001`` or 3 significant digits, other numbers
    to 3 significant digits, missing values as n/a, every text cell whole (wrapped, never cut), no index.
    Returns a pandas Styler (``.data`` is the DataFrame)."""
    def cell(x):
        if isinstance(x, str):
            return x
        return format_number(x)

    formats = {c: (format_p if str(c).lower() in P_COLUMNS else cell) for c in df.columns}
    text_cols = [c for c in df.columns  # object or pandas' str dtype (pandas 3 gives text columns the latter)
                 if (df[c].dtype == object or pd.api.types.is_string_dtype(df[c].dtype))
                 and df[c].map(lambda v: isinstance(v, str)).any()]
    styler = df.style.format(formats, na_rep=NOT_AVAILABLE).hide(axis="index")
    numeric = [c for c in df.columns if c not in text_cols]
    styler = styler.set_properties(subset=numeric, **{"white-space": "nowrap", "text-align": "right"})
    if text_cols:
        styler = styler.set_properties(subset=text_cols, **{"white-space": "normal", "text-align": "left",
                                                            "max-width": "38em"})
        left = set(text_cols)  # a text column's header sits over its text, on the left
        styler = styler.map_index(lambda name: "text-align: left" if name in left else "", axis="columns")
    return styler


class OutcomeTable(pd.DataFrame):
    """A DataFrame of trial outcomes whose notebook display says, under the table, what success and accuracy
    mean (:data:`latte_lab.schema.SUCCESS_AND_ACCURACY`): a team can succeed at a low accuracy, which reads as a
    contradiction without it. Anything computed from it is a plain DataFrame.

    >>> table = OutcomeTable({"team": ["leader_worker"], "success": [True], "accuracy": [0.31]})
    >>> "the share of the task's hidden tests that pass" in table._repr_html_()
    True
    >>> type(table.head(1)).__name__
    'DataFrame'
    """

    @property
    def _constructor(self):
        return pd.DataFrame

    def _repr_html_(self) -> str:
        import html

        note = html.escape(schema.SUCCESS_AND_ACCURACY, quote=False)
        return f'{super()._repr_html_()}<p style="font-size: 90%; max-width: 60em">{note}</p>'


def task_names() -> pd.DataFrame:
    """The one task naming (our ids, used in every table) beside the paper's and the released code's names."""
    from latte_lab.config import TASK_ALIASES

    official = {ours: theirs for theirs, ours in TASK_ALIASES.items()}
    return pd.DataFrame([{"task": t, "paper": schema.TASK_LABELS.get(t, t), "released code": official.get(t, t)}
                         for t in schema.TASK_ORDER])


# --- writing ---------------------------------------------------------------------------------------

def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no tabulate dependency), numbers as in :func:`formatted`."""
    def cell(x, col) -> str:
        if isinstance(x, str):
            return x.replace("|", "\\|").replace("\n", " ")
        return format_p(x) if str(col).lower() in P_COLUMNS else format_number(x)

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(cell(x, c) for x, c in zip(row, df.columns)) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body]) + "\n"


def _save_table(df: pd.DataFrame, out: Path, name: str, written: list[Path]) -> None:
    df.to_csv(out / f"{name}.csv", index=False)
    (out / f"{name}.md").write_text(to_markdown(df))
    written += [out / f"{name}.csv", out / f"{name}.md"]


def write_tables(data, out_dir, reference: pd.DataFrame | None = None, *, figures=None) -> list[Path]:
    """Write every table (CSV, Markdown) and report.md into ``out_dir``; returns the written paths.

    ``figures``, when given, is called once the tables are written and returns (the figure files written,
    why each figure left out was left out): its files are listed after the tables' and its reasons in
    report.md's "Skipped" section. ``ll.viz.write_all`` (``latte-lab figures``) passes the paper figures'
    drawer, which may have drawn them in other processes meanwhile.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trials = data.trials
    written: list[Path] = []
    skipped: list[str] = []

    t2 = stats.table2(trials)
    t2.to_csv(out / "table2.csv", index=False)
    blocks = [f"## {m}\n\n" + to_markdown(stats.format_table2(t2, m)) for m in t2["model"].unique()]
    (out / "table2.md").write_text("# Table 2 (mean ± SEM)\n\n" + "\n".join(blocks))
    written += [out / "table2.csv", out / "table2.md"]

    s51 = stats.stats_5_1(trials)
    s51[STATS_5_1_COLUMNS].to_csv(out / "stats_5_1.csv", index=False)
    (out / "stats_5_1.md").write_text(to_markdown(s51))
    written += [out / "stats_5_1.csv", out / "stats_5_1.md"]

    s53 = stats.section53(trials)
    _save_table(s53, out, "section53", written)
    _save_table(stats.expected_cost_per_success(trials), out, "figure2a_expected_cost", written)
    pareto = stats.pareto_points(trials, s51=s51)
    _save_table(pareto, out, "figure2b_pareto", written)
    robust = stats.robust_statistics(trials, s51=s51, s53=s53)
    _save_table(robust, out, "robust_statistics", written)
    regression_md = ""
    for metric in ("tokens", "wall"):
        try:
            coefs, anova = stats.cost_regression(trials, metric)
        except DataError as exc:
            skipped.append(f"cost regression ({metric}): {exc}")
            continue
        _save_table(coefs, out, f"regression_{metric}_coefficients", written)
        _save_table(anova, out, f"regression_{metric}_anova", written)
        regression_md += (f"\n### Normalised {metric} cost ~ team + task + model (OLS, HC3; n = "
                          f"{coefs.attrs.get('n', '?')})\n\n" + to_markdown(coefs) + "\nType II ANOVA (HC3):\n\n"
                          + to_markdown(anova))

    if figures is not None:
        paths, why = figures()
        written += paths
        skipped += why

    comparison = None
    try:
        comparison = compare_with_paper(data, reference, tables={"table2": t2, "stats_5_1": s51, "section53": s53})
        _save_table(comparison, out, "paper_comparison", written)
    except DataError as exc:
        skipped.append(f"paper comparison: {exc}")

    (out / "report.md").write_text(_report(data, t2, s51, robust, regression_md, comparison, skipped))
    written.append(out / "report.md")
    return written


def comparison_summary(comparison: pd.DataFrame, source: str = "published") -> tuple[str, list[tuple[str, pd.DataFrame]]]:
    """The report's sentence on :func:`compare_with_paper`'s table, which accounts for every printed number
    (agrees, differs for a known reason, differs otherwise, or cannot be recomputed from the data), and the
    report's sections of the numbers that do not agree, as (title, rows)."""
    agrees = comparison["agrees"].fillna(False).astype(bool)
    differs = comparison["agrees"].eq(False).fillna(False).astype(bool)  # computed and different
    unknown = comparison[comparison["agrees"].isna()]  # no number to compare: the data cannot give it
    n, ok = len(comparison), int(agrees.sum())
    t2c = comparison[comparison["section"] == "Table 2"]
    agreement = (f"{ok} of {n} printed numbers agree at the paper's precision "
                 f"(Table 2: {int(t2c['agrees'].fillna(False).sum())} of {len(t2c)} cells).")
    if source != "published":  # other trials than the paper's: no difference is explained in advance
        summary = (f"{int(differs.sum())} differ: these are trials of their own, not the paper's, so their "
                   "numbers are not expected to match; the paper reference table's explanations are about the "
                   f"published data. {len(unknown)} cannot be computed from these trials.")
        return f"{agreement} {summary}", [("Differences", comparison[differs]), ("Not computed", unknown)]
    known = comparison[differs & comparison["status"].ne("exact")]
    unexpected = comparison[differs & comparison["status"].eq("exact")]
    summary = (f"{len(known)} differ for known reasons (each explained in the table below); {len(unexpected)} "
               f"differ otherwise; {len(unknown)} cannot be recomputed from the published data (the table "
               "below says why).")
    return f"{agreement} {summary}", [("Known deviations", known), ("Other differences", unexpected),
                                      ("Not reproducible from the published data", unknown)]


def _report(data, t2, s51, robust, regression_md, comparison, skipped) -> str:
    trials = data.trials
    counts = trials.groupby(["task", "team"]).size().unstack(fill_value=0).reset_index()
    lines = [f"# Reproduction report ({data.source}: {data.path})", "",
             f"{len(trials)} trials. Trials per task x team:", "", to_markdown(counts)]
    if comparison is not None:
        text, sections = comparison_summary(comparison, data.source)
        lines += ["## Paper vs recomputed", "", text, ""]
        for title, rows in sections:
            if len(rows):
                lines += [f"### {title}", "", to_markdown(rows[["id", "paper", "ours", "note"]])]
        lines += ["Full side-by-side table: paper_comparison.md.", ""]
    lines += ["## Table 2 (both models pooled)", "", to_markdown(stats.format_table2(t2)),
              "## §5.1 normalised pooled costs and accuracy (one-sided Mann-Whitney U vs LATTE)", "",
              to_markdown(s51), "## Beyond the paper", "",
              ("Holm-corrected p-values within each family, seeded bootstrap 95 % CIs of the means and "
              "rank-biserial effect sizes (positive = LATTE better):"), "",
              to_markdown(robust[["family", "metric", "team", "n", "mean", "ci_low", "ci_high", "p", "p_holm",
                                  "rank_biserial"]]) if len(robust) else "(no data)\n",
              ("Unbalanced cells: additive OLS of normalised cost on team (LATTE baseline), task and model "
              "with HC3 errors and Type II sums of squares, so team effects are adjusted for the task and "
              "model mix of each team's successful trials."), regression_md, ""]
    if skipped:
        lines += ["## Skipped", ""] + [f"- {s}" for s in skipped] + [""]
    return "\n".join(lines)
