"""The startup OS: projects in phases, packets, chat, mail, the night shift, reports and
page checks. It builds on the engine and the services.
"""
