"""A Streamlit script for tests/reliability/test_server_stop.py: its first run starts the server's heavy-maps worker
process (:func:`normviz.workers.process.shared_worker`, as the app does for a long text) and writes the worker's
pid to ``$NORMVIZ_TEST_PID_FILE``."""

import os

import streamlit as st

from normviz.workers.process import shared_worker

worker = shared_worker(1).start()
pid = worker._all[0].pid
with open(os.environ["NORMVIZ_TEST_PID_FILE"], "w") as f:
    f.write(str(pid))
st.write(f"worker {pid}")
