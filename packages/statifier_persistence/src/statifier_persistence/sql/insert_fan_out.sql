-- Open a fan-out (its first child start does); an existing one is left as it is.
INSERT INTO {schema}.statifier_fan_outs
    (parent_id, invoke_id, generation, child_count, policy, chart_identity, failed_states,
     caller_context)
VALUES
    (%(parent_id)s, %(invoke_id)s, %(generation)s, %(count)s, %(policy)s, %(identity)s,
     %(failed_states)s, %(caller_context)s)
ON CONFLICT ON CONSTRAINT statifier_fan_outs_key DO NOTHING
