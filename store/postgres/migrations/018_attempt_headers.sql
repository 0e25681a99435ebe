-- 018: attempt detail (issue 24 item 17). Each attempt keeps the headers
-- it sent and the headers it received, bounded and with credentials
-- redacted (herald.BoundHeaders), as a JSON object encoded by
-- store/attempt_headers.go. NULL means not recorded: attempts made before
-- this migration (the API rebuilds their request from the subscription and
-- says so), or no answer (response_headers). text, not jsonb: nothing
-- queries inside, and text is the cheaper write on the completion path.
-- Retention sweeps these columns with their attempt rows.
ALTER TABLE attempts
    ADD COLUMN request_headers  text,
    ADD COLUMN response_headers text;
