-- Link a child execution to its fan-out and index (the execution row follows in the same
-- transaction: the reference is checked at commit).
INSERT INTO {schema}.statifier_fan_out_children
    (child_id, parent_id, invoke_id, generation, child_index)
VALUES (%(child_id)s, %(parent_id)s, %(invoke_id)s, %(generation)s, %(index)s)
