"""The HTTP server of `tfm serve` and its page, over one `tfm.prediction.translator.Translator`
(a torch run or an export).

Modules: server (address, key, signals, uvicorn), app (the endpoints), bodies (reading requests
within the limits), request_limits (`ServeLimits`), batch_worker (dynamic batching on one model
thread), page_assets (the page at /, from page/).
"""
