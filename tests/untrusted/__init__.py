"""Task modules a test service does not trust unless told to: importing them does things."""
