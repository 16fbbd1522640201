"""`infermeter compare`: two results files case by case (`verdict`), which case is which (`pairing`), and both sides
re-measured now (`rerun`).
"""
