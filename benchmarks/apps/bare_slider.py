"""A bare Streamlit page for bench_browser.py's floor: a layer slider and four 13×13 plotly heatmaps, no model."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

layer = st.slider("Layer", 0, 5, 0)
rng = np.random.default_rng(layer)
cols = st.columns(2)
for k in range(4):
    fig = go.Figure(go.Heatmap(z=rng.random((13, 13))))
    fig.update_layout(title=f"panel {k} · layer {layer}", height=420)
    with cols[k % 2]:
        st.plotly_chart(fig, key=f"p{k}")
