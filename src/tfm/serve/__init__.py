"""The HTTP server of `tfm serve` and its page, over one `tfm.prediction.translator.Translator`
(a torch run or an export).

Modules: server (address, key, file limit, signals, uvicorn), connections (uvicorn's settings
and the guards of connections), connection_shares (each client address's share of them),
http_guard (the Host check, the last-resort 500), app (the endpoints), server_info (GET
/info), attention_answer (POST /attention), bodies (reading requests within the limits),
request_work (tokenizing once, the work limits), request_limits (`ServeLimits`, every limit
once), batch_worker (the model thread), work_share (who goes next), server_log (the repeat
limit), page_assets (the page at /, from page/).
"""
