"""A raw Streamlit websocket visitor (no browser): what the app's frontend sends and receives, measured.

    v = Visitor(base_url)                      # ws://…/_stcore/stream, a new session
    run = v.open("text=The cat sat.&model=minilm")   # the page's first run: seconds, bytes, charts, errors
    run = v.set_widget("w_layer", int_value=3)       # move a widget (found by its key), one rerun
    v.send_widget("w_layer", int_value=4)            # the same without waiting (a burst: several in a row)
    runs = v.runs_until_finished()                   # every run until one finishes whole (not cut by a rerun)
    v.close()

Each run waits for ``script_finished`` and returns a :class:`Run`: wall seconds, bytes received, the plotly
charts drawn (their JSON specs), alert texts and exception count. Widget ids are read from the elements the
server sent (a widget's id ends with its user key); the visitor keeps every widget's last value and sends
them all with each rerun, as the frontend does. Used by ``benchmarks/bench_load.py`` and a slow test.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

from streamlit.proto import BackMsg_pb2, ForwardMsg_pb2


@dataclass
class Run:
    seconds: float
    bytes: int
    charts: dict = field(default_factory=dict)  # element id (or delta path) -> plotly spec (dict)
    alerts: list = field(default_factory=list)
    exceptions: int = 0
    status: str = ""
    elements: list = field(default_factory=list)  # the kinds of the elements drawn, in order ("progress" …)


VALUE_FIELDS = (
    "int_value",
    "double_value",
    "string_value",
    "bool_value",
    "string_array_value",
    "int_array_value",
    "double_array_value",
    "json_value",
)


class Visitor:
    def __init__(self, base_url: str, timeout: float = 600.0):
        import websocket  # websocket-client

        u = urlparse(base_url)
        self.ws = websocket.create_connection(
            f"ws://{u.netloc}/_stcore/stream", timeout=timeout, subprotocols=["streamlit"]
        )
        self.timeout = timeout
        self.widgets: dict[str, str] = {}  # user key -> widget id
        self.values: dict[str, tuple[str, object]] = {}  # widget id -> (field, value)
        self.query = ""
        self.page_hash = ""
        self.page_name = ""
        self.fragments: dict[str, str] = {}  # widget id -> the fragment it was drawn in

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass

    # ---- one rerun
    def _send(self, fragment: str = "") -> None:
        msg = BackMsg_pb2.BackMsg()
        cs = msg.rerun_script
        cs.query_string = self.query
        cs.page_script_hash = self.page_hash
        cs.page_name = self.page_name
        if fragment:
            cs.fragment_id = fragment
        for wid, (fld, value) in self.values.items():
            w = cs.widget_states.widgets.add()
            w.id = wid
            if fld.endswith("_array_value"):
                getattr(w, fld).data.extend(value)
            else:
                setattr(w, fld, value)
        self.ws.send_binary(msg.SerializeToString())

    def _collect(self, t0: float, until_element: str = "") -> Run:
        """Read until the run's ``script_finished`` (or, with ``until_element``, until an element of that kind)."""
        run = Run(0.0, 0)
        deadline = t0 + self.timeout
        while time.time() < deadline:
            data = self.ws.recv()
            if isinstance(data, str):
                continue
            run.bytes += len(data)
            fm = ForwardMsg_pb2.ForwardMsg()
            fm.ParseFromString(data)
            kind = fm.WhichOneof("type")
            if kind == "new_session":
                self.page_hash = self.page_hash or fm.new_session.page_script_hash
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                self._element(fm.delta.new_element, run, tuple(fm.metadata.delta_path), fm.delta.fragment_id)
                if until_element and run.elements and run.elements[-1] == until_element:
                    break
            elif kind == "navigation":
                self.page_hash = fm.navigation.page_script_hash or self.page_hash
            elif kind == "page_info_changed":
                self.query = fm.page_info_changed.query_string
            elif kind == "script_finished":
                run.status = ForwardMsg_pb2.ForwardMsg.ScriptFinishedStatus.Name(fm.script_finished)
                break
        run.seconds = time.time() - t0
        return run

    def _element(self, el, run: Run, path: tuple, fragment: str = "") -> None:
        kind = el.WhichOneof("type")
        if kind is None:
            return
        run.elements.append(kind)
        body = getattr(el, kind)
        if kind == "plotly_chart":
            try:
                run.charts[body.id or path] = json.loads(body.spec)
            except ValueError:
                pass
        elif kind == "alert":
            run.alerts.append(body.body)
        elif kind == "exception":
            run.exceptions += 1
            run.alerts.append(f"exception: {body.type}: {body.message}")
        wid = getattr(body, "id", "") if hasattr(body, "id") else ""
        if wid and wid.startswith("$$ID-"):
            key = wid.rsplit("-", 1)[-1] if "-" in wid else wid
            parts = wid.split("-", 2)
            key = parts[2] if len(parts) == 3 else key
            self.widgets[key] = wid
            if fragment:
                self.fragments[wid] = fragment
            else:
                self.fragments.pop(wid, None)

    def open(self, query: str = "", page: str = "") -> Run:
        """The page's first run with this query string (``page``: a page's url path, e.g. "Overview")."""
        self.query, self.page_name, self.page_hash = query, page, ""
        t0 = time.time()
        self._send()
        return self._collect(t0)

    def set_widget(self, key: str, **value) -> Run:
        """Give the widget with user key ``key`` a value (``int_value=3``, ``string_value="…"`` …); one rerun."""
        wid = self.widgets.get(key)
        if wid is None:
            raise KeyError(f"no widget with key {key!r} (seen: {sorted(self.widgets)})")
        t0 = time.time()
        self.send_widget(key, **value)
        return self._collect(t0)

    def send_widget(self, key: str, **value) -> None:
        """:meth:`set_widget` without waiting for the rerun (read what comes with :meth:`runs_until_finished`)."""
        wid = self.widgets.get(key)
        if wid is None:
            raise KeyError(f"no widget with key {key!r} (seen: {sorted(self.widgets)})")
        ((fld, v),) = value.items()
        self.values[wid] = (fld, v)
        self._send(self.fragments.get(wid, ""))  # a widget inside a fragment reruns that fragment only

    def wait_for_element(self, kind: str) -> Run:
        """Read the current run until it draws an element of ``kind`` (e.g. "progress": a computation began)."""
        return self._collect(time.time(), until_element=kind)

    def runs_until_finished(self) -> list[Run]:
        """Every run the server reports until one that finished whole (``FINISHED_SUCCESSFULLY``); the runs a
        newer request cut short end ``FINISHED_EARLY_FOR_RERUN``."""
        runs = []
        while not runs or runs[-1].status == "FINISHED_EARLY_FOR_RERUN":
            runs.append(self._collect(time.time()))
        return runs
