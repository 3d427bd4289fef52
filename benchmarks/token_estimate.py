"""How far the default token estimate, ``ceil(len(text) / 4)``, is from a real tokenizer.

``python -m benchmarks.token_estimate --ranks FILE [--ranks FILE ...]`` renders sample
scratchpad blocks (``render_block``: the text the model reads), counts each with the
estimate and with tiktoken over each ranks file given (``cl100k_base.tiktoken`` or
``o200k_base.tiktoken``, gzipped or not), and prints, per kind of notes, the estimate
divided by the real count: below 1 the estimate under-counts, and a budget in estimated
tokens lets more real tokens through.

tiktoken downloads its ranks on first use; where that cannot be done, give a local file
(some packages ship them: the ``bpe-openai`` wheel has both encodings under
``bpe_openai/data/``). The samples are this repository's own docs (English prose, as
text notes), and notes written for this benchmark: task notes as JSON in English, German,
Chinese and Japanese, notes full of code and of identifiers. Not part of ``python -m
benchmarks``: it needs tiktoken and a ranks file, neither a dependency.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import statistics
from pathlib import Path
from typing import Any

from noetic_scratchpad.render import estimate_tokens, render_block

DOCS = Path(__file__).resolve().parents[1] / "docs"

#: tiktoken's split patterns of the two encodings (as tiktoken_ext.openai_public has them).
_O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


def encoding_from(path: Path) -> tuple[str, Any]:
    """(name, tiktoken encoding) from a ranks file named after its encoding."""
    import tiktoken  # type: ignore[import-not-found,unused-ignore]  # not a dependency

    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }
    name = path.name.split(".")[0]
    pattern = _O200K if name.startswith("o200k") else _CL100K
    encoding = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return name, encoding


def _steps(prefix: str, count: int) -> list[str]:
    return [f"{prefix} {i}" for i in range(1, count + 1)]


def samples() -> dict[str, list[Any]]:
    """Scratchpad states by kind of notes."""
    english = [
        {
            "currentGoal": "Move billing to the payments platform without downtime",
            "completedSteps": [
                "Mapped the invoice fields to the new schema",
                "Enabled dual writes in staging and compared a day of invoices",
                "Backfilled 2023 invoices; 14 mismatches, all rounding of tax lines",
            ],
            "blockers": ["Finance must sign off the rounding rule before the cut-over"],
        },
        {
            "currentGoal": "Answer the customer's question about the duplicate charge",
            "completedSteps": _steps("Checked the order history of account", 12),
            "openQuestions": ["Was the second charge refunded by the bank already?"],
        },
        {
            "user": {"name": "Ada", "timezone": "Europe/London", "prefers": "short answers"},
            "notes": "Works on the data team; asked twice for CSV exports rather than charts.",
        },
    ]
    german = [
        {
            "aktuellesZiel": "Die Abrechnung ohne Ausfallzeit auf die neue Plattform umziehen",
            "erledigteSchritte": [
                "Rechnungsfelder dem neuen Schema zugeordnet",
                "Doppeltes Schreiben in der Testumgebung eingeschaltet und verglichen",
                "Rechnungen von 2023 nachgetragen; 14 Abweichungen durch Rundung der Steuer",
            ],
            "hindernisse": ["Die Buchhaltung muss die Rundungsregel vor dem Umstieg freigeben"],
        }
    ]
    chinese = [
        {
            "当前目标": "在不停机的情况下把账单系统迁移到新的支付平台",
            "已完成步骤": [
                "把发票字段对应到新的数据结构",
                "在测试环境打开双写并比较了一天的发票",
                "补录了二零二三年的发票，发现十四处差异，都是税额四舍五入造成的",  # noqa: RUF001
            ],
            "阻碍": ["切换之前需要财务部门确认四舍五入的规则"],
        }
    ]
    japanese = [
        {
            "現在の目標": "停止時間なしで請求システムを新しい決済基盤へ移行する",
            "完了した手順": [
                "請求書の項目を新しいスキーマに対応付けた",
                "検証環境で二重書き込みを有効にし、一日分の請求書を比較した",
                "二〇二三年の請求書を補完した。差異は十四件で、すべて税額の端数処理",
            ],
            "課題": ["切り替え前に経理部が端数処理の規則を承認する必要がある"],
        }
    ]
    code = [
        {
            "currentGoal": "Fix the NullPointerException in the login flow",
            "completedSteps": [
                "Reproduced with `pytest tests/auth/test_login.py::test_sso_refresh -x`",
                "Traceback ends in auth/session.py:142 in refresh_token(): token.expires_at",
                "git bisect points at 3f9c2ab (refactor: lazy-load the SSO provider)",
            ],
            "patch": (
                "if token is None or token.expires_at is None:\n    return await self._login()"
            ),
        }
    ]
    identifiers = [
        {
            "orders": {
                f"ord_{i:04d}": {
                    "id": f"7c1e{i:04x}-9b2d-4f1a-8e3c-{i:012x}",
                    "at": f"2026-11-{(i % 28) + 1:02d}T10:{i % 60:02d}:00Z",
                    "amount_cents": 1999 + 37 * i,
                }
                for i in range(12)
            }
        }
    ]
    docs = [
        text[start : start + 3000]
        for path in sorted(DOCS.glob("*.md"))
        for text in [path.read_text("utf-8")]
        for start in range(0, len(text), 3000)
    ]
    return {
        "English task notes (JSON)": english,
        "English prose (text notes: the docs)": docs,
        "notes with code (JSON)": code,
        "ids, timestamps, amounts (JSON)": identifiers,
        "German task notes (JSON)": german,
        "Chinese task notes (JSON)": chinese,
        "Japanese task notes (JSON)": japanese,
    }


def measure(encodings: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Per kind and encoding: the ratio estimate / real count (mean, min, max), n."""
    rows = []
    for kind, states in samples().items():
        blocks = [render_block(state) for state in states]
        for name, encoding in encodings:
            ratios = [
                estimate_tokens(block) / len(encoding.encode(block, disallowed_special=()))
                for block in blocks
            ]
            rows.append(
                {
                    "kind": kind,
                    "encoding": name,
                    "blocks": len(blocks),
                    "mean": statistics.fmean(ratios),
                    "min": min(ratios),
                    "max": max(ratios),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=Path, action="append", required=True)
    args = parser.parse_args()
    rows = measure([encoding_from(path) for path in args.ranks])
    print("| notes | encoding | blocks | estimate / real tokens: mean (min-max) |")
    print("|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['kind']} | {row['encoding']} | {row['blocks']} | "
            f"{row['mean']:.2f} ({row['min']:.2f}-{row['max']:.2f}) |"
        )


if __name__ == "__main__":
    main()
