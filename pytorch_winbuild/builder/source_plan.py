"""A dry run of --repo: the git commands builder/source.py would run to get the source, as data the plan prints.

The same refusals come first (a ref or repository git would misread, a local repository with nothing there, a clone
of another remote or with local changes, a folder that is not a clone), and nothing is changed: no clone, no fetch,
no rewrite of a stored credential.
"""

from __future__ import annotations

from pathlib import Path, PurePath

from pytorch_winbuild.builder.source import (
    SYNC_ARGS,
    carries_credential,
    check_local_repo,
    check_ref,
    check_repo,
    checkout_args,
    clone_args,
    clone_url,
    fetch_args,
    fetch_ref_args,
    look_at_destination,
    ref_candidates,
    set_url_args,
    update_args,
)
from pytorch_winbuild.planning.plan_model import GitArgs, GitStep, SourcePlan


def planned_checkout(
    repo: str, ref: str | None, destination: PurePath, *, look: bool, repo_key: str = "--repo", ref_key: str = "--ref"
) -> SourcePlan:
    """What acquire_source would run for `repo` at `ref` into `destination`. `look`: the destination is on this
    machine, so an existing clone is looked at (and fetched, not cloned) and a local repository must be there; a
    --host plan's folder is another machine's, for which a clone is planned."""
    check_repo(repo, repo_key)
    if ref:
        check_ref(ref, ref_key)
    url = clone_url(repo, repo_key, here=look)
    folder = str(destination)
    fetch = set_url = False
    if look:
        fetch, set_url = look_at_destination(Path(destination), url, repo_key)
        check_local_repo(repo, repo_key)
    steps = [_get_step(url, folder, fetch=fetch, look=look, asks=carries_credential(repo, repo_key))]
    if set_url:
        removal = (
            "remove the user and password an earlier version stored in the clone's .git/config (git gets them from "
            "its environment only)"
        )
        steps.insert(0, GitStep(removal, ((_in(folder, set_url_args(url)),),)))
    steps += _checkout_steps(folder, ref)
    return SourcePlan(url, ref, folder, "fetch" if fetch else "clone", tuple(steps), look)


def _in(folder: str, args: GitArgs) -> GitArgs:
    return ("-C", folder, *args)


def _get_step(url: str, folder: str, *, fetch: bool, look: bool, asks: bool) -> GitStep:
    """The clone, or the fetch of the existing clone."""
    if fetch:
        what, args = f"fetch the branches and tags of {url} into the existing clone", _in(folder, fetch_args())
    else:
        what, args = f"clone {url} into {folder}, without a checkout yet", clone_args(url, PurePath(folder))
        if not look:
            what += " (when that folder holds the clone already, the build fetches it instead)"
    if asks:
        what += "; git asks for the user and password, which no printed command holds"
    return GitStep(what, ((args,),))


def _checkout_steps(folder: str, ref: str | None) -> list[GitStep]:
    """The checkout of `ref` (its tries in the order acquire_source resolves it) and the submodules."""
    tries: list[tuple[GitArgs, ...]] = [(_in(folder, checkout_args(candidate)),) for candidate in ref_candidates(ref)]
    if ref:
        tries.append((_in(folder, fetch_ref_args(ref)), _in(folder, checkout_args("FETCH_HEAD"))))
        what = (
            f"check out {ref}, detached: its branch, else its tag, else the commit it names, else the commit fetched "
            "by that name"
        )
    else:
        what = "check out the remote's default branch, detached"
    return [
        GitStep(what, tuple(tries)),
        GitStep("point each submodule at the URL the checkout's .gitmodules gives", ((_in(folder, SYNC_ARGS),),)),
        GitStep(
            "check out every submodule at the commit the checkout records, recursively",
            ((_in(folder, update_args()),),),
        ),
    ]
