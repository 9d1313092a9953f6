"""Streamlit glue shared by the pages: cached resources, the current workspace, small drawing helpers.
No algorithm lives here; everything computed comes from core/."""
