"""What comes out: the words and documents of what the verbs return — strict JSON, text
reports, verdicts, explanations, snippets, answers, config files, sizes and rates in words.
The front ends print and write these; the engine's records stay plain data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.core.faces import face

if TYPE_CHECKING:
    from modelmon.core.measuring.advice import loader_config
    from modelmon.core.output.answer import Answer, answered
    from modelmon.core.output.answer import answer as recommendation_answer
    from modelmon.core.output.comparison import (
        apart_text,
        paired_verdict,
        pick_speedup,
        shared_fd_caveat,
        times_text,
        weighed_against,
    )
    from modelmon.core.output.config import build_document, recommendation_document
    from modelmon.core.output.config_text import render as render_config
    from modelmon.core.output.config_text import write_config
    from modelmon.core.output.explain import explain as explain_recommendation
    from modelmon.core.output.json import SCHEMA_VERSION, dumps
    from modelmon.core.output.loader import in_loader_rounds, loader_snippets
    from modelmon.core.output.not_picked import why_not_picked
    from modelmon.core.output.ranks_ab import ranks_run_line, render_ranks_ab
    from modelmon.core.output.ranks_answer import (
        paste_lines,
        render_ranks_answer,
        render_ranks_config,
        same_speed,
        same_speed_words,
    )
    from modelmon.core.output.run_words import counted, median_words
    from modelmon.core.output.server_ab import render_server_ab
    from modelmon.core.output.server_answer import render_server_answer
    from modelmon.core.output.snippets import servers_left_out
    from modelmon.core.output.snippets import snippets as recommendation_snippets
    from modelmon.core.output.text import (
        memory_text,
        model_summary,
        render_inspect,
        render_ranks,
        render_result,
        search_memory_text,
        search_time_text,
    )
    from modelmon.core.output.told import as_told
    from modelmon.core.output.verdict import (
        pairs_lines,
        shift_words,
        spread_words,
        stopped_words,
        verdict_words,
    )
    from modelmon.core.output.watch import render_watch
    from modelmon.core.system.host_memory import primed_text, priming_plan_text
    from modelmon.core.system.memory_limit import ram_text
    from modelmon.core.system.memory_limit import size_text as limit_text
    from modelmon.core.units import human_bytes, rate_span_text, rate_text

_EXPORTS = (
    ("modelmon.core.output.json", "dumps SCHEMA_VERSION"),
    (
        "modelmon.core.output.text",
        "render_result render_inspect render_ranks model_summary memory_text search_memory_text "
        "search_time_text",
    ),
    ("modelmon.core.output.watch", "render_watch"),
    (
        "modelmon.core.output.verdict",
        "verdict_words stopped_words spread_words pairs_lines shift_words",
    ),
    ("modelmon.core.output.server_ab", "render_server_ab"),
    ("modelmon.core.output.server_answer", "render_server_answer"),
    ("modelmon.core.output.explain", "explain_recommendation=explain"),
    (
        "modelmon.core.output.comparison",
        "shared_fd_caveat pick_speedup paired_verdict times_text apart_text weighed_against",
    ),
    ("modelmon.core.output.snippets", "recommendation_snippets=snippets servers_left_out"),
    ("modelmon.core.output.answer", "recommendation_answer=answer answered Answer"),
    ("modelmon.core.output.told", "as_told"),
    ("modelmon.core.output.loader", "loader_snippets in_loader_rounds"),
    ("modelmon.core.output.not_picked", "why_not_picked"),
    ("modelmon.core.output.run_words", "median_words counted"),
    (
        "modelmon.core.output.ranks_answer",
        "render_ranks_answer render_ranks_config paste_lines same_speed same_speed_words",
    ),
    ("modelmon.core.output.ranks_ab", "render_ranks_ab ranks_run_line"),
    ("modelmon.core.output.config", "build_document recommendation_document"),
    ("modelmon.core.output.config_text", "render_config=render write_config"),
    ("modelmon.core.measuring.advice", "loader_config"),
    ("modelmon.core.units", "human_bytes rate_text rate_span_text"),
    ("modelmon.core.system.host_memory", "primed_text priming_plan_text"),
    ("modelmon.core.system.memory_limit", "ram_text limit_text=size_text"),
)
__all__, __getattr__, __dir__ = face("modelmon.core.output", _EXPORTS, globals())
