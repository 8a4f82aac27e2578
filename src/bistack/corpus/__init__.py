"""Prediction over corpora: streamed sources in many formats (``sources``), chunked prediction
in this process or in worker processes (``predict``), a resumable output (``outputs``), and a
Ray Data step for clusters (``ray_data``)."""
