"""The CLI's project command: `init`, which starts a project (a definition to edit, its test, and
a CI workflow that installs fsmharness the way it was installed here)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import textwrap
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from harness.cli.common import UsageProblem

__all__ = ["CiInstall", "ci_install", "init_command"]


#: What `fsmharness init` writes: a definition skeleton, its test, and a CI workflow.
INIT_DEFINITION = "workflow_example.yaml"
INIT_TEST = "test_workflow_example.py"
INIT_CI = ".github/workflows/fsmharness.yml"

_INIT_TEXTS = {
    INIT_DEFINITION: """\
# A workflow definition to start from, written by `fsmharness init`: an agent checks an order,
# a person approves the charge, the payment runs once under an idempotency key, the customer is
# told. Edit it into your own, then:
#   fsmharness lint workflow_example.yaml     (errors and warnings, each with its location)
#   fsmharness fuzz workflow_example.yaml     (many seeded runs, faults injected, every invariant)
# `fsmharness schema` prints the JSON Schema of this format, for your editor.
name: example_order
version: 1
description: An order checked by an agent, approved by a person, charged once, confirmed.
context:                       # each execution's data; give values with --context key=value
  order_id: null
  customer_email: null
  amount: 0

tools:                         # the services the steps call (simulated while fuzzing)
  agent.check_order:
    description: The LLM checks the order and proposes the amount (structured output).
    idempotency_keys: true
    repeatable: true           # checking again charges nothing: no duplicate side effect
    output:
      type: object
      required: [amount]
      properties:
        amount: {type: number, exclusiveMinimum: 0}
  payments.charge:
    description: Charges the customer; honours idempotency keys, as payment APIs do.
    idempotency_keys: true
  email.send:
    description: Tells the customer the order was charged.
    idempotency_keys: true

events:                        # what the outside world sends
  order.cancelled:
    description: The customer cancelled the order before it was charged.
    sources: [human]

budgets:
  transitions_max: 30
  deadline: 3d
  on_exceeded: failed

states:
  checking:
    initial: true
    step:                      # run on entry; the outcome comes back as an event
      tool: agent.check_order
      input: {order_id: "=context.order_id"}
      timeout: 30s
      retry: {attempts_max: 3, retry_on: [transient, rate_limited, timeout, invalid_output]}
    on:
      step.succeeded:
        target: awaiting_approval
        actions:
          - assign: {amount: event.payload.amount}
      step.failed: failed

  awaiting_approval:
    type: wait
    approval:                  # only a person holding the role, for this exact charge
      for_state: charging
      summary: "Charge {amount} on order {order_id} to {customer_email}"
      evidence: [order_id, amount, customer_email]
      roles: [supervisor]
      expires_after: 24h
      on_expiry: deny
    on:
      approval.granted: charging
      approval.denied: rejected
      order.cancelled: cancelled

  charging:
    step:
      tool: payments.charge
      input: {order_id: "=context.order_id", amount: "=context.amount"}
      reversible: false
      needs_approval: true
      timeout: 30s
      retry: {attempts_max: 5, delay_initial: 1s, delay_max: 30s}
    on:
      step.succeeded: notifying
      step.failed: failed

  notifying:
    step:
      tool: email.send
      input: {to: "=context.customer_email", template: order_charged}
      timeout: 15s
      retry: {attempts_max: 3}
    on:
      step.succeeded: done
      step.failed: failed

  done: {type: final, outcome: success}
  rejected: {type: final, outcome: rejected}
  cancelled: {type: final, outcome: cancelled}
  failed: {type: final, outcome: failure}
""",
    INIT_TEST: '''\
"""The workflow's tests, written by `fsmharness init`.

The fsmharness pytest plugin runs a fuzz campaign for each test marked `fsm_fuzz`: seeded runs
with faults injected (crashes, duplicate and late events, tool failures, timer skew...), every
invariant checked. A broken invariant fails the test with the shrunk trace and the command that
replays it. The plugin also collects `workflow_*.yaml` files as lint, fuzz and explore tests.
"""

import pytest


@pytest.mark.fsm_fuzz("workflow_example.yaml", runs=100)
def test_every_invariant_holds(fsm_report):
    """The campaign exercised the workflow and every invariant held."""
    assert fsm_report.held
''',
    INIT_CI: """\
# Written by `fsmharness init`: runs the workflow tests on every push and pull request, shows
# the report's Markdown (verdicts, diagrams, any shrunk trace) as the job's summary, and keeps
# the replay files of a failure as an artifact, to replay where you fix it.
name: fsmharness
on: [push, pull_request]
jobs:
  workflows:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with: {python-version: "3.12"}
@@install@@
      - run: python -m pytest --fsm-report fsm-reports
      - if: always()
        run: cat fsm-reports/pytest.md >> "$GITHUB_STEP_SUMMARY"
      - if: failure()
        uses: actions/upload-artifact@v4
        with: {name: fsmharness-replays, path: fsm-reports/replays/}
""",
}

_INIT_WHAT = {
    INIT_DEFINITION: "a workflow definition to edit",
    INIT_TEST: "a pytest test that fuzzes it, by the fsm_fuzz marker",
    INIT_CI: "a GitHub Actions workflow: the tests, the report as the job's summary",
}


@dataclass(frozen=True, slots=True)
class CiInstall:
    """The CI workflow's step that installs fsmharness: its shell command (None where what
    fsmharness was installed from here is out of CI's reach) and why, for the comment above
    it."""

    command: str | None
    why: str


def ci_install(direct_url: Mapping[str, Any] | None, version: str,
               origin: tuple[str, str] | None = None) -> CiInstall:
    """Gives how CI installs the fsmharness installed here: from what pip recorded of where it
    came from (PEP 610's `direct_url.json`: None when it came from a package index) and, for
    a local folder, the URL of the git remote `origin` of the checkout it is in with its path
    there ("" at the top), or None."""
    if direct_url is None:
        return CiInstall(f"pip install {shlex.quote(f'fsmharness=={version}')}",
                         f"fsmharness {version} was installed here from a package index: CI "
                         f"must reach the same index (pip's --index-url, or PIP_INDEX_URL)")
    url = _without_credentials(str(direct_url.get("url", "")))
    subdirectory = str(direct_url.get("subdirectory") or "")
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, Mapping) and vcs.get("vcs") and vcs.get("commit_id"):
        spec = f"fsmharness @ {vcs['vcs']}+{url}@{vcs['commit_id']}" + _subdirectory(subdirectory)
        return CiInstall(f"pip install {shlex.quote(spec)}",
                         f"the commit of {url} that fsmharness was installed here from")
    if url.startswith(("https://", "http://")):
        return CiInstall(f"pip install {shlex.quote(f'fsmharness @ {url}')}",
                         "the archive fsmharness was installed here from")
    where = _local_path(url) or "an unknown place"
    cloned = _without_credentials(origin[0]) if origin else ""
    remote = _pip_git_url(cloned) if origin else None
    if origin and remote:
        spec = f"fsmharness @ git+{remote}" + _subdirectory(origin[1].strip("/"))
        return CiInstall(f"pip install {shlex.quote(spec)}",
                         f"fsmharness was installed here from the checkout {where}, cloned "
                         f"from {cloned}: this installs that repository's default branch "
                         f"(add @TAG or @COMMIT after its URL to pin one)")
    return CiInstall(None, f"fsmharness was installed here from {where}, which CI cannot reach: "
                           f"replace this step's lines with how CI installs it (a wheel it can "
                           f"download, or pip install 'fsmharness @ git+https://HOST/REPO@TAG'), "
                           f"or write this file with fsmharness init --install COMMAND")


def _without_credentials(url: str) -> str:
    """Gives `url` without the password or token in its user part (a remote cloned as
    `https://x-access-token:TOKEN@host/...`), which a file meant to be committed must not
    hold; an ssh user name with no password (`ssh://git@host/...`) stays."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name, colon, _ = user.partition(":")
    kept = f"{name}@" if parts.scheme == "ssh" and name and not colon else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=kept + host))


def _local_path(url: str) -> str:
    """Gives the folder a `file://` URL names ("" for another URL), its %-escapes decoded."""
    if not url.startswith("file://"):
        return ""
    return urllib.request.url2pathname(urllib.parse.urlsplit(url).path)


def _subdirectory(path: str) -> str:
    return f"#subdirectory={path}" if path else ""


def _pip_git_url(remote: str) -> str | None:
    """Gives a git remote's URL as pip takes it after `git+` (scp-like `user@host:path` as
    ssh://), or None for a remote CI cannot reach (a local path)."""
    if re.match(r"(https?|ssh|git)://", remote):
        return remote
    scp = re.fullmatch(r"([\w.-]+@)?([\w.-]+):(?!/)(.+)", remote)
    return f"ssh://{scp[1] or ''}{scp[2]}/{scp[3]}" if scp else None


def _installed_here() -> CiInstall:
    """Gives how CI installs the fsmharness that runs this command, from what pip recorded."""
    versions = []
    for found in importlib.metadata.distributions(name="fsmharness"):
        versions.append(found.version)
        text = found.read_text("direct_url.json")
        if not text:  # a source tree's egg-info, or an install from an index
            continue
        try:
            direct_url = json.loads(text)
        except ValueError:
            continue
        folder = _local_path(str(direct_url.get("url", "")))
        origin = _git_origin(Path(folder)) if folder else None
        return ci_install(direct_url, found.version, origin)
    if not versions:
        return CiInstall(None, "fsmharness runs here from its source, not installed: CI "
                               "cannot install it from here; replace this step's lines with "
                               "how CI installs it, or write this file with fsmharness init "
                               "--install COMMAND")
    return ci_install(None, versions[0])


def _git_origin(folder: Path) -> tuple[str, str] | None:
    """Gives the URL of the git remote `origin` of the checkout `folder` is in, and the
    folder's path in it, or None."""
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-prefix"],
                              capture_output=True, text=True, timeout=30, check=False)
        remote = subprocess.run(["git", "-C", str(folder), "remote", "get-url", "origin"],
                                capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):  # no git here
        return None
    if done.returncode or remote.returncode or not remote.stdout.strip():
        return None
    return remote.stdout.strip(), done.stdout.strip()


def _install_lines(install: CiInstall) -> str:
    """Gives the CI workflow's install steps: pytest's, then a comment that says where the
    command that installs fsmharness comes from, and that command (or, not knowing one, one
    that fails saying so)."""
    why = re.sub(r"[\x00-\x1f\x7f]", " ", install.why)
    lines = ["      - run: pip install pytest"]
    lines += textwrap.wrap(why, 90, initial_indent="      # ", subsequent_indent="      # ",
                           break_on_hyphens=False, break_long_words=False)
    commands = install.command.splitlines() if install.command else [
        "echo 'fsmharness: this step does not say how CI installs fsmharness (see the "
        "comment above it)' >&2", "exit 1"]
    lines.append("      - run: |")
    lines += [f"          {command}" for command in commands]
    return "\n".join(lines)


@click.command("init")
@click.option("--dir", "folder", default=".", show_default=True, metavar="DIR",
              help="Write into this folder (made if missing) instead of the current one.")
@click.option("--install", "install", metavar="COMMAND",
              help="The shell command the CI workflow installs fsmharness with. By default, "
                   "from what pip recorded of where the fsmharness here came from: a git "
                   "commit, an archive's URL, the git remote of a local checkout, or a package "
                   "index.")
def init_command(folder: str, install: str | None) -> None:
    """Start a project: write a workflow definition skeleton (workflow_example.yaml), a pytest
    test that fuzzes it, and a GitHub Actions workflow (.github/workflows/fsmharness.yml) that
    installs fsmharness the way it was installed here (or by --install) and runs the tests.

    Overwrites nothing: when one of the files exists, exit 2 naming it, and write none. Exit 0
    when all are written.
    """
    if install is not None and not install.strip():
        raise UsageProblem("--install: give the shell command CI installs fsmharness with")
    step = (CiInstall(install.strip(), "as fsmharness init --install was told")
            if install is not None else _installed_here())
    texts = {**_INIT_TEXTS,
             INIT_CI: _INIT_TEXTS[INIT_CI].replace("@@install@@", _install_lines(step))}
    base = Path(folder)
    try:
        if base.exists() and not base.is_dir():
            raise UsageProblem(f"--dir {folder}: is a file, not a folder")
        targets = [base / name for name in _INIT_TEXTS]
        taken = [str(path) for path in targets if os.path.lexists(path)]
    except OSError as exc:  # a name too long for the file system
        raise UsageProblem(f"--dir {folder}: cannot use it: {exc.strerror}") from exc
    if taken:
        raise UsageProblem(f"init: {', '.join(taken)} exist{'s' if len(taken) == 1 else ''} "
                           f"already; init overwrites nothing and wrote nothing (move "
                           f"{'it' if len(taken) == 1 else 'them'} away, or init into "
                           f"another folder with --dir)")
    written: list[Path] = []
    made: list[Path] = []  # folders made here, removed again when a file cannot be written
    try:
        for path, text in zip(targets, texts.values(), strict=True):
            missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            made += reversed(missing)
            with open(path, "x", encoding="utf-8") as out:  # never over a file made meanwhile
                written.append(path)
                out.write(text)
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        for made_folder in reversed(made):
            with contextlib.suppress(OSError):
                made_folder.rmdir()
        raise UsageProblem(f"init: cannot write {exc.filename or folder}: "
                           f"{exc.strerror or exc}; wrote nothing") from exc
    for path, name in zip(targets, _INIT_TEXTS, strict=True):
        click.echo(f"wrote {path}  ({_INIT_WHAT[name]})")
    definition = shlex.quote(str(base / INIT_DEFINITION))
    tests = "" if base == Path(".") else f" {shlex.quote(folder)}"
    click.echo(f"next: fsmharness lint {definition} && fsmharness fuzz {definition}")
    click.echo(f"then: python -m pytest{tests}")
    if step.command is None:
        click.echo(f"note: {base / INIT_CI} does not know how CI installs fsmharness, and "
                   f"fails until its install step says it (or init with --install COMMAND)")
    root = next((above for above in base.resolve().parents if (above / ".git").exists()), None)
    if root is not None and not (base / ".git").exists():
        click.echo(f"note: GitHub runs the workflows of {root / '.github' / 'workflows'} only: "
                   f"move {INIT_CI} there (and give its steps `working-directory: "
                   f"{base.resolve().relative_to(root)}`)")
