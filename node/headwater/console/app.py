"""The console's web application (aiohttp, Jinja2 templates, htmx for live refresh).

Every page is rendered on the server from :class:`~headwater.console.backend.ClusterView`
calls, run on a thread pool as the client is blocking.  The live parts of a page poll the
same URL every few seconds and swap in their own section (htmx ``hx-select``), so a page
refreshes without reloading and without any script of its own.

Rules every response follows:

- Output is escaped: the Jinja2 environment autoescapes every template.
- ``Content-Security-Policy`` allows scripts and styles only from the console itself
  (no inline script, no eval), forms only to itself, and no framing.
- A change (POST) needs a valid CSRF token (:mod:`headwater.console.csrf`), is refused in
  read-only mode, and its input is parsed by :mod:`headwater.console.inputs` before any
  call; a refusal or bad input is shown as a message and changes nothing.
- The cluster's own refusals (ACLs, a topic that exists) are shown as Kafka names them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import jinja2
from aiohttp import web
from multidict import MultiDictProxy

from headwater import errors
from headwater.console import charts, csrf, formats, inputs, operator_progress
from headwater.console.backend import ClusterView
from headwater.console.operator_progress import KubeAccessError, KubeReader

T = TypeVar("T")
log = logging.getLogger(__name__)

HTMX = "htmx-2.0.11.min.js"
REFRESH_S = 3

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # same-origin, not no-referrer: with no-referrer browsers send `Origin: null` on the
    # console's own form posts, which the CSRF check must then refuse.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
MAX_FORM_BYTES = 2 * 1024 * 1024

_AUTHORIZATION = (
    errors.TopicAuthorizationFailedError,
    errors.GroupAuthorizationFailedError,
    errors.ClusterAuthorizationFailedError,
)


class Settings(NamedTuple):
    """How the console runs: ``read_only`` refuses every change; ``identity`` says who
    the console acts as (shown on every page)."""

    read_only: bool = False
    identity: str = "ANONYMOUS"
    secret: bytes = b""


class OperatorAccess(NamedTuple):
    """Where the operator's progress comes from: ``reader`` (None: no Kubernetes access,
    ``why`` says so on the page)."""

    reader: KubeReader | None = None
    why: str = operator_progress.NO_ACCESS


VIEW = web.AppKey("view", ClusterView)
OPERATOR = web.AppKey("operator", OperatorAccess)
SETTINGS = web.AppKey("settings", Settings)
TEMPLATES = web.AppKey("templates", jinja2.Environment)
CSRF_COOKIE = web.RequestKey("csrf_cookie", str)


class Refused(Exception):
    """A change the console itself refuses (read-only mode, a forged form): HTTP 403."""


def _package_dir(name: str) -> Path:
    return Path(str(resources.files("headwater.console").joinpath(name)))


def environment() -> jinja2.Environment:
    """The templates, autoescaped whatever their file name."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_package_dir("templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["time"] = _time
    env.filters["size"] = _size
    env.globals["show"] = formats.show
    env.globals["lag_chart"] = charts.lag_chart
    env.globals["htmx"] = HTMX
    env.globals["refresh_s"] = REFRESH_S
    env.globals["max_records"] = inputs.MAX_RECORDS
    env.globals["acl_resource_types"] = inputs.ACL_RESOURCE_TYPES
    env.globals["acl_pattern_types"] = inputs.ACL_PATTERN_TYPES
    env.globals["acl_operations"] = inputs.ACL_OPERATIONS
    env.globals["acl_permissions"] = inputs.ACL_PERMISSIONS
    env.globals["scram_mechanisms"] = inputs.SCRAM_MECHANISMS
    return env


def _time(ms: int) -> str:
    if ms < 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def status_of(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and message for an error a page shows."""
    if isinstance(exc, inputs.InvalidInput):
        return 400, str(exc)
    if isinstance(exc, Refused):
        return 403, str(exc)
    if isinstance(exc, _AUTHORIZATION):
        return 403, f"Refused by the cluster's ACLs: {exc}"
    if isinstance(exc, errors.UnknownTopicOrPartitionError | errors.GroupIdNotFoundError):
        return 404, str(exc)
    if isinstance(exc, errors.HeadwaterError) and exc.retriable:
        return 503, f"The cluster did not answer in time; try again: {exc}"
    if isinstance(exc, errors.HeadwaterError):
        return 409, f"The cluster refused: {exc}"
    raise exc


# -- plumbing --------------------------------------------------------------------------


async def _blocking(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def render(
    env: jinja2.Environment,
    template: str,
    settings: Settings,
    *,
    csrf_cookie: str,
    path: str,
    **context: Any,
) -> str:
    """``template`` rendered with what every page needs (who, read-only, the CSRF token)."""
    return env.get_template(template).render(
        read_only=settings.read_only,
        identity=settings.identity,
        csrf_field=csrf.FIELD,
        csrf_token=csrf.form_token(settings.secret, csrf_cookie),
        path=path,
        message=context.pop("message", ""),
        error=context.pop("error", ""),
        form=context.pop("form", {}),
        plan=context.pop("plan", []),
        **context,
    )


def _render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    body = render(
        request.app[TEMPLATES],
        template,
        request.app[SETTINGS],
        csrf_cookie=request[CSRF_COOKIE],
        path=request.path_qs,
        **context,
    )
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


async def _page(
    request: web.Request,
    template: str,
    load: Callable[[], Any],
    *,
    status: int = 200,
    message: str = "",
    error: str = "",
    **context: Any,
) -> web.Response:
    """Render ``template`` with ``data`` from ``load``; an error loading it is the page."""
    try:
        data = await _blocking(load)
    except (errors.HeadwaterError, inputs.InvalidInput) as exc:
        code, text = status_of(exc)
        return _render(request, "error.html", code if status == 200 else status, error=text)
    return _render(request, template, status, data=data, message=message, error=error, **context)


async def _change(request: web.Request, action: Callable[[], str]) -> tuple[int, str, str]:
    """Run a change: (status, message, error).  Refused in read-only mode."""
    if request.app[SETTINGS].read_only:
        return 403, "", "The console is read-only: it changes nothing."
    try:
        return 200, await _blocking(action), ""
    except (errors.HeadwaterError, inputs.InvalidInput) as exc:
        code, text = status_of(exc)
        return code, "", text


async def _form(request: web.Request) -> Mapping[str, str]:
    data: MultiDictProxy[Any] = await request.post()
    return {k: v for k, v in data.items() if isinstance(v, str)}


@web.middleware
async def security_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Security headers on every answer; a CSRF cookie for every browser; POSTs checked."""
    settings = request.app[SETTINGS]
    cookie = request.cookies.get(csrf.COOKIE, "")
    fresh = len(cookie) < 32 or len(cookie) > 64
    if fresh:
        cookie = csrf.new_cookie()
    request[CSRF_COOKIE] = cookie
    try:
        if request.method == "POST":
            form = await _form(request)
            why = csrf.check(
                settings.secret,
                None if fresh else cookie,
                form.get(csrf.FIELD),
                request.headers.get("Origin"),
                f"{request.scheme}://{request.host}",
            )
            if why:
                response: web.StreamResponse = _render(
                    request, "error.html", 403, error=f"Refused: {why}."
                )
            else:
                response = await handler(request)
        else:
            response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = _render(request, "error.html", exc.status, error=f"{exc.reason}.")
    except Exception as exc:  # a bug: say so on the page, the traceback goes to the log
        log.exception("console: %s %s failed", request.method, request.path)
        response = _render(
            request, "error.html", 500, error=f"The console failed: {type(exc).__name__}: {exc}"
        )
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    if fresh:
        response.set_cookie(
            csrf.COOKIE, cookie, httponly=True, samesite="Strict", path="/", max_age=None
        )
    return response


# -- pages -------------------------------------------------------------------------------


async def index(request: web.Request) -> web.StreamResponse:
    return web.Response(status=302, headers={"Location": "/cluster"})


async def cluster(request: web.Request) -> web.StreamResponse:
    return await _page(request, "cluster.html", request.app[VIEW].cluster)


async def operator(request: web.Request) -> web.StreamResponse:
    """The operator's rolls and scaling.  Kubernetes failing to answer is shown inside the
    live section (HTTP 200), so the next refresh replaces it when Kubernetes answers again."""
    access = request.app[OPERATOR]
    if access.reader is None:
        return _render(request, "operator.html", data=None, kube_error="", no_access=access.why)
    try:
        data = await _blocking(access.reader.read)
    except KubeAccessError as exc:
        return _render(request, "operator.html", data=None, kube_error=str(exc), no_access="")
    return _render(request, "operator.html", data=data, kube_error="", no_access="")


async def topics(request: web.Request, status: int = 200, **extra: Any) -> web.StreamResponse:
    query = request.query.get("q", "")[: inputs.MAX_TOPIC_NAME]
    view = request.app[VIEW]

    def load() -> Any:
        rows = view.topics()
        return [r for r in rows if query in r.name] if query else rows

    return await _page(request, "topics.html", load, status=status, q=query, **extra)


async def create_topic(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    view = request.app[VIEW]

    def act() -> str:
        new = inputs.new_topic(form)
        view.create_topic(new)
        return f"Created topic {new.name}."

    status, message, error = await _change(request, act)
    return await topics(request, status, message=message, error=error, form=form)


def _topic_name(request: web.Request) -> str:
    return inputs.topic_name(request.match_info["name"])


async def topic(request: web.Request, status: int = 200, **extra: Any) -> web.StreamResponse:
    view = request.app[VIEW]
    return await _page(
        request, "topic.html", lambda: view.topic(_topic_name(request)), status=status, **extra
    )


async def delete_topic(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    view = request.app[VIEW]

    def act() -> str:
        name = _topic_name(request)
        if form.get("confirm") != name:
            raise inputs.InvalidInput("confirm", f"type the topic's name ({name}) to delete it")
        view.delete_topic(name)
        return f"Deleted topic {name}."

    status, message, error = await _change(request, act)
    if status == 200:
        return await topics(request, message=message)
    return await topic(request, status, error=error)


async def add_partitions(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    view = request.app[VIEW]

    def act() -> str:
        name = _topic_name(request)
        total = inputs.new_partition_count(form, view.partition_count(name))
        view.add_partitions(name, total)
        return f"Topic {name} now has {total} partitions."

    status, message, error = await _change(request, act)
    return await topic(request, status, message=message, error=error)


async def alter_configs(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    view = request.app[VIEW]

    def act() -> str:
        name = _topic_name(request)
        change = inputs.config_change(form)
        view.alter_configs(name, change)
        done = [f"set {k}={v}" for k, v in change.set.items()]
        done += [f"deleted {k}" for k in change.delete]
        return f"Topic {name}: {', '.join(done)}."

    status, message, error = await _change(request, act)
    return await topic(request, status, message=message, error=error, form=form)


async def messages(request: web.Request, status: int = 200, **extra: Any) -> web.StreamResponse:
    view = request.app[VIEW]
    params = dict(request.query)

    def load() -> Any:
        name = _topic_name(request)
        query = inputs.browse_query(params, view.partition_count(name))
        return view.browse(name, query)

    return await _page(
        request,
        "messages.html",
        load,
        status=status,
        name=request.match_info["name"],
        params=params,
        **extra,
    )


async def produce(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    view = request.app[VIEW]

    def act() -> str:
        name = _topic_name(request)
        record = inputs.produce_form(form, view.partition_count(name))
        partition, offset = view.produce(name, record)
        return f"Produced to {name}, partition {partition} at offset {offset}."

    status, message, error = await _change(request, act)
    return await messages(request, status, message=message, error=error, form=form)


async def groups(request: web.Request) -> web.StreamResponse:
    return await _page(request, "groups.html", request.app[VIEW].groups)


async def group(
    request: web.Request, gid: str | None = None, status: int = 200, **extra: Any
) -> web.StreamResponse:
    view = request.app[VIEW]
    raw = gid if gid is not None else request.query.get("id")
    return await _page(
        request, "group.html", lambda: view.group(inputs.group_id(raw)), status=status, **extra
    )


async def reset_offsets(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    view = request.app[VIEW]
    plan: list[Any] = []

    def act() -> str:
        gid = inputs.group_id(form.get("group"))
        reset = inputs.reset_form(form, int(time.time() * 1000))
        plan.extend(view.reset_offsets(gid, reset))
        if reset.execute:
            return f"Committed new offsets of group {gid} on {reset.topic}."
        return f"Dry run: group {gid} would move to these offsets on {reset.topic}."

    status, message, error = await _change(request, act)
    return await group(
        request, form.get("group", ""), status, message=message, error=error, plan=plan, form=form
    )


async def delete_group(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    view = request.app[VIEW]

    def act() -> str:
        gid = inputs.group_id(form.get("group"))
        if form.get("confirm") != gid:
            raise inputs.InvalidInput("confirm", "type the group's id to delete it")
        view.delete_group(gid)
        return f"Deleted group {gid}."

    status, message, error = await _change(request, act)
    if status == 200:
        return await _page(request, "groups.html", view.groups, message=message)
    return await group(request, form.get("group", ""), status, error=error, form=form)


async def acls(request: web.Request, status: int = 200, **extra: Any) -> web.StreamResponse:
    return await _page(request, "acls.html", request.app[VIEW].security, status=status, **extra)


async def _security_change(
    request: web.Request, act: Callable[[Mapping[str, str]], str], keep_form: bool = True
) -> web.StreamResponse:
    form = await _form(request)
    status, message, error = await _change(request, lambda: act(form))
    shown = {k: v for k, v in form.items() if k != "password"} if keep_form else {}
    return await acls(request, status, message=message, error=error, form=shown)


async def create_acl(request: web.Request) -> web.StreamResponse:
    view = request.app[VIEW]

    def act(form: Mapping[str, str]) -> str:
        binding = inputs.acl_binding(form)
        view.create_acl(binding)
        return f"Created ACL: {binding}."

    return await _security_change(request, act)


async def delete_acl(request: web.Request) -> web.StreamResponse:
    view = request.app[VIEW]

    def act(form: Mapping[str, str]) -> str:
        binding = inputs.acl_binding(form)
        if not view.delete_acl(binding):
            raise errors.for_code(
                errors.ErrorCode.RESOURCE_NOT_FOUND, f"no ACL {binding} to delete"
            )
        return f"Deleted ACL: {binding}."

    return await _security_change(request, act, keep_form=False)


async def set_user(request: web.Request) -> web.StreamResponse:
    view = request.app[VIEW]

    def act(form: Mapping[str, str]) -> str:
        user = inputs.scram_form(form)
        view.set_scram_user(user)
        return f"Set the {user.mechanism} credential of user {user.user}."

    return await _security_change(request, act)


async def delete_user(request: web.Request) -> web.StreamResponse:
    view = request.app[VIEW]

    def act(form: Mapping[str, str]) -> str:
        user = inputs.scram_user(form.get("user"))
        mechanism = inputs.choice(
            "mechanism", form.get("mechanism"), inputs.SCRAM_MECHANISMS, "SCRAM-SHA-512"
        )
        view.delete_scram_user(user, mechanism)
        return f"Deleted the {mechanism} credential of user {user}."

    return await _security_change(request, act, keep_form=False)


async def not_found(request: web.Request) -> web.StreamResponse:
    return _render(request, "error.html", 404, error=f"No page at {request.path[:200]}.")


def make_app(
    view: ClusterView, settings: Settings, operator_access: OperatorAccess | None = None
) -> web.Application:
    """The console's application over ``view`` (which the caller closes); the operator's
    progress from ``operator_access`` (default: none, the page says it needs Kubernetes)."""
    if not settings.secret:
        settings = settings._replace(secret=csrf.new_secret())
    app = web.Application(middlewares=[security_middleware], client_max_size=MAX_FORM_BYTES)
    app[VIEW] = view
    app[SETTINGS] = settings
    app[OPERATOR] = operator_access or OperatorAccess()
    app[TEMPLATES] = environment()
    app.router.add_get("/", index)
    app.router.add_get("/cluster", cluster)
    app.router.add_get("/operator", operator)
    app.router.add_get("/topics", topics)
    app.router.add_post("/topics", create_topic)
    app.router.add_get("/topics/{name}", topic)
    app.router.add_post("/topics/{name}/delete", delete_topic)
    app.router.add_post("/topics/{name}/partitions", add_partitions)
    app.router.add_post("/topics/{name}/configs", alter_configs)
    app.router.add_get("/topics/{name}/messages", messages)
    app.router.add_post("/topics/{name}/messages", produce)
    app.router.add_get("/groups", groups)
    app.router.add_get("/group", group)
    app.router.add_post("/group/reset", reset_offsets)
    app.router.add_post("/group/delete", delete_group)
    app.router.add_get("/acls", acls)
    app.router.add_post("/acls", create_acl)
    app.router.add_post("/acls/delete", delete_acl)
    app.router.add_post("/users", set_user)
    app.router.add_post("/users/delete", delete_user)
    app.router.add_static("/static/", _package_dir("static"), show_index=False)
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
