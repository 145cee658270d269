"""``--recall``: the commands wrap their strategy in Recall and report what it quoted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.cli import main
from semantic_helpers import require_wordllama


def chat_file(tmp_path: Path) -> Path:
    msgs: list[dict[str, str]] = [{"role": "system", "content": "You are helpful."}]
    for i in range(60):
        msgs.append(
            {"role": "user", "content": f"Fact {i}: my locker code for room {i} is K{i * 7}."}
        )
        msgs.append({"role": "assistant", "content": f"Noted room {i}."})
    msgs.append({"role": "user", "content": "What is the locker code for room 12?"})
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(msgs))
    return path


def compact_args(path: Path, out: Path, *extra: str) -> list[str]:
    head = ["compact", str(path), "--budget", "300", "--strategy", "sliding"]
    return [*head, *extra, "-o", str(out), "--json"]


def test_compact_with_recall_quotes_the_old_fact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = chat_file(tmp_path)
    out = tmp_path / "out.json"
    code = main(compact_args(path, out, "--recall"))
    assert code == 0
    stats = json.loads(capsys.readouterr().out)
    stats = stats.get("stats", stats)
    assert 25 in stats["recalled"]
    assert "locker" in stats["recall"]
    assert "K84" in out.read_text()


def test_without_recall_nothing_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = chat_file(tmp_path)
    code = main(compact_args(path, tmp_path / "o.json"))
    assert code == 0
    stats = json.loads(capsys.readouterr().out)
    assert "recall" not in stats.get("stats", stats)


def test_plan_shows_the_recall_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = chat_file(tmp_path)
    assert (
        main(["plan", str(path), "--budget", "400", "--strategy", "checkpoint", "--recall", "0.4"])
        == 0
    )
    text = capsys.readouterr().out
    assert "note: recall: " in text
    assert "locker" in text


def test_a_bad_share_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["compact", str(chat_file(tmp_path)), "--budget", "300", "--recall", "2"])
    assert exit_.value.code == 2


def test_an_embedder_recalls_a_paraphrase(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_wordllama()
    msgs = json.loads(chat_file(tmp_path).read_text())[:-1]
    msgs[20:20] = [
        {"role": "user", "content": "We brought home a puppy from the shelter, a beagle."}
    ]
    msgs.append({"role": "user", "content": "Which dog did we adopt?"})
    path = tmp_path / "pets.json"
    path.write_text(json.dumps(msgs))
    found = {}
    for extra in ((), ("--embedder", "wordllama")):
        out = tmp_path / "out.json"
        assert main(compact_args(path, out, "--recall", *extra)) == 0
        capsys.readouterr()
        found[extra] = "a beagle" in out.read_text()
    assert found == {(): False, ("--embedder", "wordllama"): True}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--embedder", "wordllama"), "add --recall"),
        (("--recall-fill",), "--recall-fill works with --recall"),
        (("--recall", "--embedder", "bert"), "unknown embedder"),
        (("--recall", "--embedder", "wordllama:big"), "DIM must be"),
        (("--recall", "--embedder", "wordllama:100"), "dim must be 64, 128 or 256"),
    ],
)
def test_a_bad_embedder_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], says: str
) -> None:
    require_wordllama()
    code = main(["compact", str(chat_file(tmp_path)), "--budget", "300", *extra])
    assert code == 2
    assert says in capsys.readouterr().err


def test_recall_fill_quotes_more_within_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = chat_file(tmp_path)
    counts = []
    for extra in (("--recall",), ("--recall", "--recall-fill")):
        out = tmp_path / "out.json"
        assert main(compact_args(path, out, *extra)) == 0
        stats = json.loads(capsys.readouterr().out)
        stats = stats.get("stats", stats)
        assert stats["tokens_after"] <= 300
        counts.append(len(stats["recalled"]))
    assert counts[1] > counts[0]
