"""`infermeter compare` and every decision between two measurements: two results files case by case (`verdict`),
which case is which (`pairing`), both sides re-measured now (`rerun`), and the one sequential decision with stated
error rates (`decision`) that the rerun, `check` and optimize's finalists race use (`decision_rounds`,
`decision_race`).
"""
