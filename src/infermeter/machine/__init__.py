"""This machine: its environment record, its ceilings (`infermeter peak`), the speed probe and interference readings."""
