"""Everyday notebook requests, run headless against a model, checked automatically.

Each task is a small notebook run cell by cell in a fresh kernel (jupyter_client), from
the repository root: setup cells (the user's earlier work: loading data, a cell that
raised, a Markdown plan), one ``%%agent --approve auto -m MODEL`` cell with the request
as a data scientist types it, and a checker cell that reads the kernel state and the
agent's transcript and prints a JSON verdict:

- **passed**: the kernel state is right (``totals`` holds the per-region sums, a bar
  chart was shown, ...) and, for questions, the answer states the right number;
- **invented**: not passed, and the answer presents a value as its result anyway:
  for a question, any number that is not the right one, or another candidate of a name
  question (another customer); for any task, a number that appears in no tool output and
  not in the prompt, or a name the answer states (quoted, a date, a capitalised word
  inside a sentence) that no tool output, the prompt or the namespace shows;
- **failed**: anything else (no answer, an error, the wrong state without made-up numbers).

It prints one line per task and a summary (passed / invented / failed, median and p90
agent-cell seconds). The agent cell's time is wall time from its start to its end, as the
user waits for it; the model's server is started (and its prompt-cache warm-up awaited: see
``_WAIT_WARM``) in an untimed setup cell first, so the
first task does not pay for loading the weights.

The sets: ``--set core`` (the default: the 15 tasks the levers were tuned on), ``--set
heldout`` (12 requests on other data, written before any tuning on them and only ever run to
measure), ``--set tuning`` (10 requests on a third data set, written to tune on instead of the
held-out set), ``--set multistep`` (13 analysis questions of
several steps on bench/data/trips.csv that state their answer format, ``@key[value]``, scored
by exact keys; written before any tuning and only run to measure), ``--set multistep-tuning``
(10 questions of the same kind on bench/data/stays.csv, to tune on instead), or ``--set all``
(core and held-out). ``--no-agent`` measures the baseline for a set with keys: one completion of the
same model per question, no tools.

"Invented" also covers a value the model's own code printed as a literal (``print('apple')``):
such output is cut from the tool text the checker compares against, as the run checks do.

Usage::

    python bench/notebook_tasks.py -m local/qwen2.5-coder-1.5b [--set core|heldout|tuning|multistep|multistep-tuning|all]
        [-k load,plot] [--json out.json] [--profile small|default]

``--profile small`` forces the small-model profile (short system prompt, fewer tools, a turn
budget: local/apply.py), ``default`` turns it off; without the option the extension decides
(local/* models get it).
Environment variables reach the kernel (e.g. ``PI_NOTEBOOK_LLAMA_THREADS=2``,
``PI_NOTEBOOK_LOCAL_CONSTRAIN=0``), so the provider levers are measured by setting them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SALES_PATH = "notebooks/data/sales.csv"
SALES = pd.read_csv(ROOT / SALES_PATH)
VERDICT_MARK = "@@notebook-task-verdict@@"

LOAD = f"import pandas as pd\ndf = pd.read_csv({SALES_PATH!r})"
TOTALS = "totals = df.groupby('region')['revenue'].sum()"


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    # the kernel-state check: a Python expression over the user namespace (plus `answer`,
    # `figure_shown`, `code_run`: the python calls' code), True when the work is done
    check: str = "True"
    setup: tuple[str, ...] = ()       # code cells; "md:" prefix makes a Markdown cell
    numbers: tuple[float, ...] = ()   # a question: the answer must state one of these ...
    all_numbers: bool = False         # ... or, for a question asking several, all of them
    words: tuple[str, ...] = ()       # an explanation: the answer must mention all of these
    #                                   ("a|b": either spelling, e.g. a date written two ways)
    wrong: tuple[str, ...] = ()       # a name question: the other candidates; naming one is invented
    needs: str = ""                   # which notebook-context tool the task relies on
    # a question that states its answer format: each ``@key[value]`` the answer must end with,
    # and the right value (a number is right within half a unit of its last decimal, a name
    # when it is the same word); a tag with another value is a value presented as the result
    keys: tuple[tuple[str, str], ...] = ()


def _round(x: float) -> float:
    return round(float(x), 2)


TASKS: list[Task] = [
    Task("load", "load notebooks/data/sales.csv into a DataFrame called df",
         check=f"isinstance(df, pd.DataFrame) and df.equals(pd.read_csv({SALES_PATH!r}))",
         setup=("import pandas as pd",)),
    Task("aggregate", "compute total revenue per region into totals",
         check="_series_equal(totals, df.groupby('region')['revenue'].sum())",
         setup=(LOAD,)),
    Task("plot", "plot a bar chart of totals",
         check="figure_shown and any('totals' in c and 'bar' in c for c in code_run)",
         setup=(LOAD, TOTALS)),
    Task("rows", "how many rows does df have?",
         numbers=(len(SALES),), setup=(LOAD,)),
    Task("mean", "what is the mean of the units column?",
         numbers=(_round(SALES["units"].mean()),), setup=(LOAD,)),
    Task("filter", "make a DataFrame north with only the rows of the north region",
         check="isinstance(north, pd.DataFrame) and len(north) == 12 and set(north['region']) == {'north'}",
         setup=(LOAD,)),
    Task("derived", "add a column price to df: revenue divided by units",
         check="((df['price'] - df['revenue'] / df['units']).abs() < 1e-6).all()",
         setup=(LOAD,)),
    Task("describe", "describe the revenue column: what are its mean, min and max?",
         numbers=(_round(SALES["revenue"].mean()), SALES["revenue"].min(), SALES["revenue"].max()),
         all_numbers=True, setup=(LOAD,)),
    Task("topn", "put the 3 rows with the highest revenue into top3",
         check="sorted(top3['revenue']) == sorted(df.nlargest(3, 'revenue')['revenue'])",
         setup=(LOAD,)),
    Task("merge", "merge df with targets on region into merged",
         check="len(merged) == 24 and 'target' in merged and "
               "(merged.loc[merged.region == 'north', 'target'] == 1500).all()",
         setup=(LOAD, "targets = pd.DataFrame({'region': ['north', 'south'], 'target': [1500, 1300]})")),
    Task("south_total", "what was the total revenue of the south region?",
         numbers=(_round(SALES.loc[SALES.region == "south", "revenue"].sum()),), setup=(LOAD,)),
    Task("best_month", "which month had the highest total revenue, and how much was it?",
         numbers=(_round(SALES.groupby("month")["revenue"].sum().max()),),
         words=(SALES.groupby("month")["revenue"].sum().idxmax(),), setup=(LOAD,)),
    Task("fix_error", "fix the error in the last cell",
         check="_series_equal(by_region, df.groupby('region')['units'].sum())",
         setup=(LOAD, "by_region = df.groupby('regoin')['units'].sum()"), needs="history"),
    Task("explain_cell", "explain what cell 2 does",
         words=("month",), check="_mentions(answer, 'growth', 'percent', 'pct_change', 'change')",
         setup=(LOAD, "growth = df.groupby('month')['revenue'].sum().pct_change() * 100"),
         needs="history"),
    Task("plan", "continue with step 2 of the plan",
         check="_series_equal(mean_units, df.groupby('region')['units'].mean())",
         setup=("md:## Plan\n1. Load the sales data into `df`.\n2. Compute the mean units per region "
                "into `mean_units`.\n3. Plot `mean_units` as a bar chart.", LOAD), needs="notebook"),
]


# --- the held-out set -----------------------------------------------------------------------
# Written before any tuning on it and never tuned on afterwards: only run to measure.
# Different data (bench/data/orders.csv: orders of six customers for five products in four
# cities), different phrasings from the core set ("save it as X", "put ... in X", "I need X to
# hold ..."), names and dates as answers, a join and a pivot.

ORDERS_PATH = "bench/data/orders.csv"
ORDERS = pd.read_csv(ROOT / ORDERS_PATH)
LOAD_ORDERS = f"import pandas as pd\norders = pd.read_csv({ORDERS_PATH!r})"
CUSTOMERS = ("customers = pd.DataFrame({'customer': ['Acme', 'Birchwood', 'Corvid', 'Dunmore', 'Elmira', "
             "'Fenwick'], 'segment': ['retail', 'hotel', 'retail', 'office', 'hotel', 'office']})")
_SPEND = ORDERS.groupby("customer")["amount"].sum()
_PRODUCT_COUNTS = ORDERS["product"].value_counts()
_FIRST = pd.Timestamp(ORDERS["date"].min())

HELDOUT_TASKS: list[Task] = [
    Task("h_load", f"read {ORDERS_PATH} and save it as orders",
         check=f"isinstance(orders, pd.DataFrame) and orders.equals(pd.read_csv({ORDERS_PATH!r}))",
         setup=("import pandas as pd",)),
    Task("h_put", "put the number of orders per city in city_counts",
         check="_series_equal(city_counts, orders.groupby('city').size().rename('count'))",
         setup=(LOAD_ORDERS,)),
    Task("h_hold", "I need big_orders to hold the orders with qty above 5",
         check="isinstance(big_orders, pd.DataFrame) and len(big_orders) == (orders['qty'] > 5).sum() "
               "and (big_orders['qty'] > 5).all()",
         setup=(LOAD_ORDERS,)),
    Task("h_top_customer", "which customer spent the most in total?",
         words=(str(_SPEND.idxmax()),), wrong=tuple(c for c in _SPEND.index if c != _SPEND.idxmax()),
         setup=(LOAD_ORDERS,)),
    Task("h_top_product", "what's the product people order most often?",
         words=(str(_PRODUCT_COUNTS.idxmax()),),
         wrong=tuple(p for p in _PRODUCT_COUNTS.index if p != _PRODUCT_COUNTS.idxmax()),
         setup=(LOAD_ORDERS,)),
    Task("h_first_date", "when was the first order placed?",
         words=(f"{_FIRST:%Y-%m-%d}|{_FIRST:%B} {_FIRST.day}|{_FIRST:%B} {_FIRST:%d}|{_FIRST.day} {_FIRST:%B}|"
                f"{_FIRST:%b} {_FIRST.day}|{_FIRST.day} {_FIRST:%b}",),
         wrong=tuple(d for d in sorted(set(ORDERS["date"])) if d != f"{_FIRST:%Y-%m-%d}"),
         setup=(LOAD_ORDERS,)),
    Task("h_join", "join orders with customers on customer and save it as full",
         check="isinstance(full, pd.DataFrame) and len(full) == len(orders) and 'segment' in full "
               "and (full.loc[full['customer'] == 'Acme', 'segment'] == 'retail').all() "
               "and 'amount' in full",
         setup=(LOAD_ORDERS, CUSTOMERS)),
    Task("h_pivot", "store a pivot table of the total amount with one row per city and one column "
                    "per product in pv",
         check="_frame_close(pv, orders.pivot_table(index='city', columns='product', values='amount', "
               "aggfunc='sum'))",
         setup=(LOAD_ORDERS,)),
    Task("h_mean", "what is the average order amount?",
         numbers=(_round(ORDERS["amount"].mean()),), setup=(LOAD_ORDERS,)),
    Task("h_unique", "how many different customers are there?",
         numbers=(ORDERS["customer"].nunique(),), setup=(LOAD_ORDERS,)),
    Task("h_sort", "sort orders by amount, largest first, and keep the result as ranked",
         check="isinstance(ranked, pd.DataFrame) and len(ranked) == len(orders) and "
               "list(ranked['amount']) == sorted(orders['amount'], reverse=True)",
         setup=(LOAD_ORDERS,)),
    Task("h_month", "give orders a column month holding the year and month of each order's date, "
                    "like 2024-03",
         check="(orders['month'].astype(str).str[:7] == orders['date'].astype(str).str[:7]).all()",
         setup=(LOAD_ORDERS,)),
]

# --- the tuning set -------------------------------------------------------------------------
# Requests written for tuning the levers against a printed guess and a blocked call sent
# again, so that the held-out set stays untouched: other data again
# (bench/data/loans.csv: library loans of five members, seven titles, three branches) and
# other phrasings ("open ... as X", "make X, the ...", "... stored as X", "keep ... in X").

LOANS_PATH = "bench/data/loans.csv"
LOANS = pd.read_csv(ROOT / LOANS_PATH)
LOAD_LOANS = f"import pandas as pd\nloans = pd.read_csv({LOANS_PATH!r})"
_BORROWS = LOANS["member"].value_counts()
_TITLES = LOANS["title"].value_counts()
_BRANCHES = LOANS["branch"].value_counts()
_LATEST = pd.Timestamp(LOANS["loaned"].max())


def _others(counts: pd.Series, best: object) -> tuple[str, ...]:
    return tuple(str(k) for k in counts.index if k != best)


TUNING_TASKS: list[Task] = [
    Task("t_load", f"open {LOANS_PATH} as loans",
         check=f"isinstance(loans, pd.DataFrame) and loans.equals(pd.read_csv({LOANS_PATH!r}))",
         setup=("import pandas as pd",)),
    Task("t_member", "who borrowed the most books?",
         words=(str(_BORROWS.idxmax()),), wrong=_others(_BORROWS, _BORROWS.idxmax()), setup=(LOAD_LOANS,)),
    Task("t_title", "which title was borrowed most often?",
         words=(str(_TITLES.idxmax()),), wrong=_others(_TITLES, _TITLES.idxmax()), setup=(LOAD_LOANS,)),
    Task("t_fewest", "which branch has the fewest loans?",
         words=(str(_BRANCHES.idxmin()),), wrong=_others(_BRANCHES, _BRANCHES.idxmin()), setup=(LOAD_LOANS,)),
    Task("t_latest", "what's the most recent loan date?",
         words=(f"{_LATEST:%Y-%m-%d}|{_LATEST:%B} {_LATEST.day}|{_LATEST.day} {_LATEST:%B}|"
                f"{_LATEST:%b} {_LATEST.day}|{_LATEST.day} {_LATEST:%b}",),
         wrong=tuple(d for d in sorted(set(LOANS["loaned"])) if d != f"{_LATEST:%Y-%m-%d}"),
         setup=(LOAD_LOANS,)),
    Task("t_long", "how many loans lasted longer than 14 days?",
         numbers=(int((LOANS["days"] > 14).sum()),), setup=(LOAD_LOANS,)),
    Task("t_genre", "make genre_days, the average days per genre",
         check="_series_equal(genre_days, loans.groupby('genre')['days'].mean())", setup=(LOAD_LOANS,)),
    Task("t_east", "keep only the loans from the east branch in east",
         check="isinstance(east, pd.DataFrame) and len(east) == (loans['branch'] == 'east').sum() "
               "and set(east['branch']) == {'east'}",
         setup=(LOAD_LOANS,)),
    Task("t_weeks", "add a column weeks to loans: days divided by 7",
         check="((loans['weeks'] - loans['days'] / 7).abs() < 1e-6).all()", setup=(LOAD_LOANS,)),
    Task("t_branch_days", "total days by branch, stored as branch_days",
         check="_series_equal(branch_days, loans.groupby('branch')['days'].sum())", setup=(LOAD_LOANS,)),
]

# --- the multi-step set --------------------------------------------------------------------
# Written before any tuning on it, and only ever run to measure: analysis questions of several
# steps (load, clean, group, test, answer in a stated @key[value] format), as a data scientist
# asks them with nothing loaded yet. Data of its own (bench/data/trips.csv: 120 trips in four
# cities by bike, scooter or car; fares written "$16.94", some distances and ratings missing).
# The keys are computed here from the file by the steps the question names.

TRIPS_PATH = "bench/data/trips.csv"
TRIPS = pd.read_csv(ROOT / TRIPS_PATH)
_FARE = TRIPS["fare"].str.lstrip("$").astype(float)
_CLEAN = TRIPS.dropna(subset=["distance_km"]).assign(fare=_FARE)
_SPEED = _CLEAN["distance_km"] / _CLEAN["duration_min"] * 60
_TIP_PCT = (TRIPS["tip"] / _FARE * 100).groupby(TRIPS["vehicle"]).mean()
_MONTH_FARE = _FARE.groupby(TRIPS["date"].str[:7]).sum()
_WEEKDAY = pd.to_datetime(TRIPS["date"]).dt.day_name().value_counts()
_DURATION_STD = TRIPS.groupby("city")["duration_min"].std()
_PORTO = TRIPS[TRIPS["city"] == "Porto"]
_LYON_FARE, _PORTO_FARE = _FARE[TRIPS["city"] == "Lyon"], _FARE[TRIPS["city"] == "Porto"]
_WELCH_T = (_LYON_FARE.mean() - _PORTO_FARE.mean()) / (
    _LYON_FARE.var() / len(_LYON_FARE) + _PORTO_FARE.var() / len(_PORTO_FARE)) ** 0.5
_CAR_KM = _CLEAN[_CLEAN["vehicle"] == "car"]
_PER_KM = (_CAR_KM["fare"] / _CAR_KM["distance_km"]).groupby(_CAR_KM["city"]).mean()


def _key(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


MULTISTEP_TASKS: list[Task] = [
    Task("m_mean_fare", f"Load {TRIPS_PATH}. The fare column is text like $16.94: turn it into "
                        "numbers and give the mean fare rounded to 2 decimals. End your answer with "
                        "@mean_fare[value].",
         keys=(("mean_fare", _key(_FARE.mean(), 2)),), setup=("import pandas as pd",)),
    Task("m_top_city", f"Read {TRIPS_PATH}, drop the trips that have no distance_km, and tell me which "
                       "city has the most of the remaining trips. Answer as @top_city[name].",
         keys=(("top_city", str(_CLEAN["city"].value_counts().idxmax())),), setup=("import pandas as pd",)),
    Task("m_speed", f"Using {TRIPS_PATH}: compute each trip's speed in km/h (distance_km divided by "
                    "duration_min, times 60), ignoring trips without a distance, and report the median "
                    "speed rounded to 1 decimal as @median_speed[value].",
         keys=(("median_speed", _key(_SPEED.median(), 1)),), setup=("import pandas as pd",)),
    Task("m_tip_vehicle", f"From {TRIPS_PATH}, work out the tip as a percentage of the fare (the fare has "
                          "a $ sign) for every trip, average it per vehicle, and say which vehicle has "
                          "the highest average tip percentage: @best_vehicle[name].",
         keys=(("best_vehicle", str(_TIP_PCT.idxmax())),), setup=("import pandas as pd",)),
    Task("m_corr", f"Load {TRIPS_PATH}, convert fare to a number, drop rows with a missing distance_km, "
                   "and compute the Pearson correlation between distance_km and fare, rounded to 3 "
                   "decimals. Finish with @corr[value].",
         keys=(("corr", _key(_CLEAN["distance_km"].corr(_CLEAN["fare"]), 3)),), setup=("import pandas as pd",)),
    Task("m_welch", f"In {TRIPS_PATH}, compare the fares of Lyon and Porto (fare is text with a $ sign) "
                    "with Welch's t statistic: (mean Lyon - mean Porto) / sqrt(var Lyon / n Lyon + "
                    "var Porto / n Porto), sample variances. Round to 2 decimals and end with "
                    "@t_stat[value].",
         keys=(("t_stat", _key(_WELCH_T, 2)),), setup=("import pandas as pd",)),
    Task("m_month", f"Which month had the highest total fare in {TRIPS_PATH}? Clean the $ from the fare "
                    "first, group by month of the date column, and answer as @best_month[YYYY-MM].",
         keys=(("best_month", str(_MONTH_FARE.idxmax())),), setup=("import pandas as pd",)),
    Task("m_ratings", f"Load {TRIPS_PATH}. How many trips have no rating, and what is the mean rating of "
                      "the rated trips, rounded to 2 decimals? Answer with @missing_ratings[count] and "
                      "@mean_rating[value].",
         keys=(("missing_ratings", str(int(TRIPS["rating"].isna().sum()))),
               ("mean_rating", _key(TRIPS["rating"].mean(), 2))), setup=("import pandas as pd",)),
    Task("m_bike_share", f"Of the trips in Porto in {TRIPS_PATH}, what percentage were made by bike? "
                         "Round to 1 decimal and give it as @bike_share[value].",
         keys=(("bike_share", _key((_PORTO["vehicle"] == "bike").mean() * 100, 1)),),
         setup=("import pandas as pd",)),
    Task("m_long_cheap", f"Read {TRIPS_PATH} and count the trips longer than 10 km whose fare (after "
                         "removing the $) is below 20. Answer @long_cheap[count].",
         keys=(("long_cheap", str(int(((_CLEAN["distance_km"] > 10) & (_CLEAN["fare"] < 20)).sum()))),),
         setup=("import pandas as pd",)),
    Task("m_duration_std", f"Group {TRIPS_PATH} by city and compute the standard deviation of "
                           "duration_min. Which city varies most, and by how much (2 decimals)? End "
                           "with @city[name] @std[value].",
         keys=(("city", str(_DURATION_STD.idxmax())), ("std", _key(_DURATION_STD.max(), 2))),
         setup=("import pandas as pd",)),
    Task("m_car_per_km", f"For the car trips in {TRIPS_PATH} that have a distance, compute the fare per "
                         "km (fare without the $ divided by distance_km), average it per city, and "
                         "report the cheapest city: @cheapest_city[name].",
         keys=(("cheapest_city", str(_PER_KM.idxmin())),), setup=("import pandas as pd",)),
    Task("m_weekday", f"On which day of the week were the most trips taken in {TRIPS_PATH}? Use the date "
                      "column and answer as @weekday[name], e.g. @weekday[Monday].",
         keys=(("weekday", str(_WEEKDAY.idxmax())),), setup=("import pandas as pd",)),
]

# --- the multi-step tuning set -------------------------------------------------------------
# Multi-step questions written to tune on, so that the multi-step set above stays held out:
# the same style (load, clean, group, test, answer as @key[value]) on other data
# (bench/data/stays.csv: 110 hotel stays in four hotels; prices written "1,204.50 EUR", some
# nights and reviews missing) and other phrasings.

STAYS_PATH = "bench/data/stays.csv"
STAYS = pd.read_csv(ROOT / STAYS_PATH)
_PRICE = STAYS["price"].str.replace(" EUR", "").str.replace(",", "").astype(float)
_STAYED = STAYS.dropna(subset=["nights"]).assign(price=_PRICE)
_PER_NIGHT = _STAYED["price"] / _STAYED["nights"]
_HOTEL_NIGHT = _PER_NIGHT.groupby(_STAYED["hotel"]).mean()
_MONTH_PRICE = _PRICE.groupby(STAYS["checkin"].str[:7]).sum()
_NIGHTS_STD = STAYS.groupby("hotel")["nights"].std()
_CEDAR = STAYS[STAYS["hotel"] == "Cedar"]

MULTISTEP_TUNING_TASKS: list[Task] = [
    Task("s_mean_price", f"Open {STAYS_PATH}. price is text such as 1,204.50 EUR; make it numeric and "
                         "tell me the average price to 2 decimals as @mean_price[value].",
         keys=(("mean_price", _key(_PRICE.mean(), 2)),), setup=("import pandas as pd",)),
    Task("s_top_hotel", f"Take {STAYS_PATH}, remove the stays with a missing nights value, then find the "
                        "hotel with the most stays left. Reply with @top_hotel[name].",
         keys=(("top_hotel", str(_STAYED["hotel"].value_counts().idxmax())),), setup=("import pandas as pd",)),
    Task("s_per_night", f"With {STAYS_PATH}: price per night is the numeric price divided by nights. "
                        "Skip stays without nights and give the median price per night, 2 decimals, "
                        "as @median_per_night[value].",
         keys=(("median_per_night", _key(_PER_NIGHT.median(), 2)),), setup=("import pandas as pd",)),
    Task("s_priciest", f"Using {STAYS_PATH}, compute the price per night of each stay that has nights "
                       "(price has an EUR suffix and thousands commas), average it by hotel and name "
                       "the most expensive hotel: @priciest_hotel[name].",
         keys=(("priciest_hotel", str(_HOTEL_NIGHT.idxmax())),), setup=("import pandas as pd",)),
    Task("s_month", f"In {STAYS_PATH}, which check-in month brought in the most money? Convert price to "
                    "numbers, group by the month of checkin and answer @top_month[YYYY-MM].",
         keys=(("top_month", str(_MONTH_PRICE.idxmax())),), setup=("import pandas as pd",)),
    Task("s_reviews", f"Load {STAYS_PATH}. Count the stays without a review and compute the average "
                      "review of the others (2 decimals). Give @no_review[count] and @avg_review[value].",
         keys=(("no_review", str(int(STAYS["review"].isna().sum()))),
               ("avg_review", _key(STAYS["review"].mean(), 2))), setup=("import pandas as pd",)),
    Task("s_suite_share", f"Among the Cedar stays in {STAYS_PATH}, what share were suites, in percent "
                          "with 1 decimal? Write it as @suite_share[value].",
         keys=(("suite_share", _key((_CEDAR["room"] == "suite").mean() * 100, 1)),),
         setup=("import pandas as pd",)),
    Task("s_long_expensive", f"How many stays in {STAYS_PATH} lasted more than 4 nights and cost above "
                             "500 (price without the EUR and commas)? Answer @long_expensive[count].",
         keys=(("long_expensive", str(int(((_STAYED["nights"] > 4) & (_STAYED["price"] > 500)).sum()))),),
         setup=("import pandas as pd",)),
    Task("s_nights_std", f"Group {STAYS_PATH} by hotel and take the standard deviation of nights. Which "
                         "hotel's stays vary most, and what is that deviation to 2 decimals? Finish with "
                         "@hotel[name] @nights_std[value].",
         keys=(("hotel", str(_NIGHTS_STD.idxmax())), ("nights_std", _key(_NIGHTS_STD.max(), 2))),
         setup=("import pandas as pd",)),
    Task("s_corr", f"Read {STAYS_PATH}, clean price into a float, drop the rows missing nights and report "
                   "the Pearson correlation of nights and price to 3 decimals: @corr[value].",
         keys=(("corr", _key(_STAYED["nights"].corr(_STAYED["price"]), 3)),), setup=("import pandas as pd",)),
]

SETS = {"core": TASKS, "heldout": HELDOUT_TASKS, "tuning": TUNING_TASKS, "multistep": MULTISTEP_TASKS,
        "multistep-tuning": MULTISTEP_TUNING_TASKS}


_TAG = __import__("re").compile(r"@(\w+)\[([^\]\n]*)\]")


def _key_matches(got: str, want: str) -> bool:
    got = got.strip().strip("'\"`").lstrip("$").rstrip("%").strip()
    try:
        decimals = len(want.split(".", 1)[1]) if "." in want else 0
        return abs(float(got) - float(want)) <= 0.5 * 10 ** -decimals + 1e-9
    except ValueError:
        return got.lower() == want.lower()


def score_keys(task: Task, answer: str) -> tuple[bool, bool]:
    """(every key right, some key stated with a wrong value) for a task with stated keys."""
    stated: dict[str, list[str]] = {}
    for key, value in _TAG.findall(answer):
        stated.setdefault(key, []).append(value)
    right = all(any(_key_matches(v, want) for v in stated.get(key, [])) for key, want in task.keys)
    wrong = any(not _key_matches(v, want) for key, want in task.keys for v in stated.get(key, [])
                if _STATED.fullmatch(v.strip()) and v.strip().lower() not in ("value", "name", "count"))
    return right, wrong


# a value as an answer states it (a number, a word, a date); not a placeholder or code
# (``@mean_fare[{mean_fare_rounded}]`` in a code block states nothing)
_STATED = __import__("re").compile(r"[-+$]?[\w.,:% -]+")


# --- the notebook of one task ---------------------------------------------------------------

_CHECKER_PRELUDE = r'''
import json as _json, re as _re, time as _time
from pi_notebook import get_agent as _get_agent

_agent_s = _time.monotonic() - _task_t0
_msgs = list(_get_agent().state.messages)

def _texts(m):
    c = m.content
    return [c] if isinstance(c, str) else [getattr(b, "text", "") for b in c if getattr(b, "type", "") == "text"]

_final = [m for m in _msgs if m.role == "assistant" and m.stop_reason == "stop"]
answer = "\n".join(_texts(_final[-1])) if _final else ""

import ast as _ast
def _shown_literals(code):
    """Strings the code prints, shows or assigns as written (the model's own guess, not data)."""
    try:
        tree = _ast.parse(code)
    except SyntaxError:
        return [a or b for a, b in _re.findall(r"'([^'\n]*)'|\"([^\"\n]*)\"", code)]
    def parts(node):
        if isinstance(node, _ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, _ast.JoinedStr):
            return [x for v in node.values for x in (parts(v.value) if isinstance(v, _ast.FormattedValue) else parts(v))]
        if isinstance(node, (_ast.Tuple, _ast.List)):
            return [x for e in node.elts for x in parts(e)]
        return []
    out = []
    for n in _ast.walk(tree):
        if isinstance(n, _ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", "")) in ("print", "display"):
            out += [x for a in n.args for x in parts(a)]
        elif isinstance(n, (_ast.Expr, _ast.Assign)):
            out += parts(n.value)
    return out

_call_code = {c.id: str(c.arguments.get("code", "")) for m in _msgs if m.role == "assistant"
              for c in m.content if c.type == "toolCall"}
_guesses = {}
for _m in _msgs:
    if _m.role == "toolResult":
        _guesses[_m.tool_call_id] = sorted({v.strip() for v in _shown_literals(_call_code.get(_m.tool_call_id, ""))
                                            if any(ch.isalpha() for ch in v)}, key=len, reverse=True)
def _cut(text, literals):
    for lit in literals:
        text = _re.sub(_re.escape(lit), " ", text, flags=_re.IGNORECASE)
    return text
_tool_text = "\n".join(_cut(t, _guesses.get(m.tool_call_id, ())) for m in _msgs if m.role == "toolResult"
                       for t in _texts(m))
_guess_words = {v.lower() for vs in _guesses.values() for v in vs if v.isidentifier()}
_errors = [m.error_message for m in _msgs if m.role == "assistant" and m.stop_reason == "error"]
_calls = [c.name for m in _msgs if m.role == "assistant" for c in m.content if c.type == "toolCall"]
code_run = [str(c.arguments.get("code", "")) for m in _msgs if m.role == "assistant"
            for c in m.content if c.type == "toolCall" and c.name == "python"]
_trace = []
for m in _msgs:
    if m.role == "assistant":
        _said = " ".join(b.text for b in m.content if b.type == "text").strip()
        _calls_of = [c for c in m.content if c.type == "toolCall"]
        if _said and not _calls_of:
            _trace.append(f"said: {_said[:160]}")  # an answer the checks then corrected
        _trace += [f"{c.name}: {str(c.arguments.get('code', c.arguments))[:160]}" for c in _calls_of]
    elif m.role == "user" and getattr(m, "author", None):
        _trace.append("check: " + " ".join(_texts(m))[:160])
    elif m.role == "toolResult":
        _trace.append("-> " + " ".join(_texts(m))[:160])
figure_shown = any(
    getattr(b, "type", "") == "image" for m in _msgs if m.role == "toolResult" for b in m.content
) or any(
    "image/png" in (d.get("data") or {})
    for m in _msgs if m.role == "toolResult" and isinstance(m.details, dict)
    for d in (m.details.get("displays") or [])
)

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december"]
_WORD_DATE = _re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2}),?\s+(\d{4})\b", _re.IGNORECASE)

def _iso_dates(text):
    """'March 05, 2024' -> '2024-03-05': a date in words is the same value as in the output."""
    return {f"{y}-{_MONTHS.index(m.lower()) + 1:02d}-{int(d):02d}" for m, d, y in _WORD_DATE.findall(text)}

def _numbers(text):
    text = _WORD_DATE.sub(" ", text)                                  # dates are names here,
    text = _re.sub(r"\b\d{4}-\d{2}(-\d{2})?\b", " ", text)       # in words or as months/dates
    # digits inside a name ('numpy.float64', 'df2') are no stated value
    return [float(n.replace(",", "")) for n in _re.findall(r"(?<![A-Za-z_\d])(?:-?\d[\d,]*(?:\.\d+)?|-?\.\d+)", text)
            if n.replace(",", "").replace("-", "").replace(".", "")]

def _close(a, b):
    return abs(a - b) <= max(0.051, 0.002 * abs(b))

def _series_equal(got, want):
    if isinstance(got, pd.DataFrame):  # the same numbers as a table (e.g. after reset_index())
        if want.index.name in got.columns:
            got = got.set_index(want.index.name)
        got = got[want.name] if want.name in got else got.iloc[:, -1]
    got = pd.Series(got)
    return len(got) == len(want) and all(_close(float(got[k]), float(v)) for k, v in want.items())

def _mentions(text, *words):
    return any(w.lower() in text.lower() for w in words)

def _frame_close(got, want):
    """The same table of numbers (missing cells as 0: a pivot may fill them or not)."""
    if not isinstance(got, pd.DataFrame):
        return False
    got = got.copy()
    got.columns = [str(c) for c in got.columns]
    got.index = [str(i) for i in got.index]
    want = want.copy()
    want.columns = [str(c) for c in want.columns]
    want.index = [str(i) for i in want.index]
    if set(got.columns) != set(want.columns) or set(got.index) != set(want.index):
        return False
    got = got.loc[want.index, want.columns].astype(float).fillna(0)
    return bool(((got - want.astype(float).fillna(0)).abs() < 0.051).all().all())

# what an answer states as a value besides numbers: quoted or code-spelled names, dates, and
# capitalised words inside a sentence ("the top products are Apple, Banana and Orange")
_GENERIC = {"i", "dataframe", "dataframes", "series", "python", "pandas", "nan", "none", "true", "false", "jupyter",
            "csv", "numpy", "matplotlib", "ok", "id", "january", "february", "march", "april", "may",
            "june", "july", "august", "september", "october", "november", "december", "monday",
            "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

def _value_words(text):
    found = set(_re.findall(r"`([^`\n]{1,40})`|'([^'\n]{1,40})'|\"([^\"\n]{1,40})\"", text))
    values = {v for group in found for v in group if v}
    values |= set(_re.findall(r"\b\d{4}-\d{2}(?:-\d{2})?\b", text))
    values |= _iso_dates(text)
    for sentence in _re.split(r"[.!?:;]\s+|\n+|^\s*[-*]\s+", text):
        words = _re.findall(r"[A-Za-z][A-Za-z0-9_]*", sentence)
        values |= {w for w in words[1:] if w[0].isupper() and w.lower() not in _GENERIC}
    values |= {w for w in _re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text) if w.lower() in _guess_words}
    return values
'''

_CHECKER = r'''
_expected = {numbers!r}
_words = {words!r}
_wrong = {wrong!r}
_prompt_numbers = _numbers({prompt!r})
try:
    _state_ok = bool({check})
    _state_error = None
except Exception as _exc:
    _state_ok, _state_error = False, f"{{type(_exc).__name__}}: {{_exc}}"
_said = _numbers(answer)
_numbers_ok = not _expected or ({quantifier}(any(_close(a, e) for a in _said) for e in _expected))
_words_ok = all(any(a.lower() in answer.lower() for a in w.split("|")) for w in _words)
_named_wrong = [w for w in _wrong if _re.search(r"\b" + _re.escape(w) + r"\b", answer, _re.IGNORECASE)]
_passed = bool(answer) and _state_ok and _numbers_ok and _words_ok and not _named_wrong
# a value the answer states that no tool output, the prompt, the setup code or the namespace's
# names show (the model saw those in its context)
_known = "\n".join([_tool_text, {prompt!r}, {setup!r}, *map(str, globals())]).lower()
for _v in list(globals().values()):
    if isinstance(_v, pd.DataFrame):
        _known += "\n" + " ".join(map(str, _v.columns)).lower()
_unsupported_values = sorted(v for v in _value_words(answer) if v.lower() not in _known)
if _passed:
    _invented = False
elif _expected:
    _invented = (bool(_said) and not _numbers_ok) or bool(_unsupported_values)
else:
    _seen = "\n".join(globals().get("_bench_context_notes", []))  # the summary the model was given
    _supported = _numbers(_tool_text) + _prompt_numbers + _numbers(_seen)
    _invented = (any(not any(_close(a, s) for s in _supported) for a in _said)
                 or bool(_named_wrong) or bool(_unsupported_values))
print({mark!r} + _json.dumps({{
    "passed": _passed, "invented": _invented, "seconds": round(_agent_s, 1),
    "warm_s": globals().get("_bench_warm_s"),
    "state_ok": _state_ok, "state_error": _state_error, "numbers_ok": _numbers_ok,
    "named_wrong": _named_wrong, "unsupported_values": _unsupported_values,
    "answer": answer[:300], "tags": _re.findall(r"@\w+\[[^\]\n]*\]", answer), "calls": _calls, "errors": _errors[:2], "trace": _trace,
    "turns": sum(1 for m in _msgs if m.role == "assistant"),
}}))
'''


def _profile_cell(profile: str) -> str:
    """``small`` forces the small-model profile (local/apply.py applies it to local/* models
    anyway), ``default`` turns it off, so both can be measured on the same model."""
    return f"import os\nos.environ['PI_NOTEBOOK_SMALL_PROFILE'] = {'1' if profile == 'small' else '0'!r}"


def _hidden(source: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["bench_hidden"] = True  # bookkeeping: run without an execution count
    return cell


def build_notebook(task: Task, model: str, profile: str | None, notebook_path: Path) -> nbformat.NotebookNode:
    cells = [_hidden(LOAD_EXT), _hidden(_prestart_cell(model, notebook_path))]
    for source in task.setup:
        if source.startswith("md:"):
            cells.append(nbformat.v4.new_markdown_cell(source[3:]))
        else:
            cells.append(nbformat.v4.new_code_cell(source))
    if profile is not None:
        cells.append(_hidden(_profile_cell(profile)))
    cells.append(_hidden("import time as _t\n_task_t0 = _t.monotonic()"))
    cells.append(nbformat.v4.new_code_cell(f"%%agent --approve auto -m {model}\n{task.prompt}"))
    checker = _CHECKER_PRELUDE + _CHECKER.format(
        numbers=tuple(float(n) for n in task.numbers), words=task.words, prompt=task.prompt,
        wrong=task.wrong, setup="\n".join(task.setup),
        quantifier="all" if task.all_numbers else "any",
        check=task.check, mark=VERDICT_MARK)
    cells.append(_hidden(checker))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


LOAD_EXT = "%load_ext pi_notebook\n%config AgentMagics.autosave = False"


def _prestart_cell(model: str, notebook_path: Path) -> str:
    # JPY_SESSION_NAME is how a Jupyter server tells a kernel its notebook's path
    lines = [f"import os\nos.environ['JPY_SESSION_NAME'] = {str(notebook_path)!r}"]
    if model.startswith("local/"):
        model_id = model.split("/", 1)[1]
        lines.append("from pi_notebook.local.provider import get_local_server as _gls\n"
                     f"_gls({model_id!r}).start_blocking()\n" + _WAIT_WARM.format(model_id=model_id))
    return "\n".join(lines)


# The server warms its prompt cache with the remembered system prompt right after it starts
# (local/supervisor.py); a session's cells after its first find that done. The setup cell waits
# for it, so each task's agent cell is timed as such a cell; what a fresh kernel's first cell
# pays on top (the warm-up) is printed per task and in the summary.
_WAIT_WARM = """
import time as _t, urllib.request as _u
_srv = _gls({model_id!r})
_t0 = _t.monotonic()
_warm = (_srv._path('.warm.json')).exists()
while _warm and _t.monotonic() - _t0 < 180:
    try:
        _m = _u.urlopen(_u.Request(f'http://127.0.0.1:{{_srv.port}}/metrics',
                        headers={{'Authorization': f'Bearer {{_srv.api_key}}'}}), timeout=5).read().decode()
    except OSError:
        break
    _v = dict(l.split(' ', 1) for l in _m.splitlines() if l.startswith('llamacpp:'))
    if float(_v.get('llamacpp:prompt_tokens_total', 0)) > 0 and float(_v.get('llamacpp:requests_processing', 1)) == 0:
        break
    _t.sleep(0.2)
_bench_warm_s = round(_t.monotonic() - _t0, 1)
"""


def _execute(kc, source: str, store_history: bool, timeout: int) -> tuple[str, list[str]]:
    """Run one cell; returns (stdout text, error lines). Bookkeeping cells run with
    ``store_history=False``, so the user's cells keep the execution counts 1, 2, ..."""
    msg_id = kc.execute(source, store_history=store_history, allow_stdin=False)
    out: list[str] = []
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            errors.append(f"timeout after {timeout} s")
            break
        try:
            msg = kc.get_iopub_msg(timeout=remaining)
        except Exception:  # queue.Empty
            continue
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            errors.append(f"{content['ename']}: {content['evalue']}")
        elif kind == "status" and content["execution_state"] == "idle":
            break
    return "".join(out), errors


def run_task(task: Task, model: str, profile: str | None, timeout: int) -> dict:
    from jupyter_client.manager import start_new_kernel

    with tempfile.TemporaryDirectory(prefix=f"task-{task.name}-") as tmp:
        path = Path(tmp) / f"{task.name}.ipynb"
        nb = build_notebook(task, model, profile, path)
        nbformat.write(nb, path)  # the notebook file the context tools may read
        started = time.monotonic()
        km, kc = start_new_kernel(kernel_name="python3", cwd=str(ROOT), env=dict(os.environ))
        out, errors = "", []
        try:
            for cell in nb.cells:
                if cell.cell_type != "code":
                    continue
                hidden = bool(cell.metadata.get("bench_hidden"))
                out, cell_errors = _execute(kc, cell.source, not hidden, timeout)
                errors += cell_errors
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        wall = time.monotonic() - started
        if VERDICT_MARK not in out:
            return {"task": task.name, "passed": False, "invented": False, "seconds": None,
                    "answer": "", "errors": [*errors, out[-300:]][-2:], "wall": round(wall, 1)}
        verdict = json.loads(out.split(VERDICT_MARK, 1)[1].strip().splitlines()[0])
        verdict.update(task=task.name, wall=round(wall, 1), needs=task.needs)
        if task.keys:
            right, wrong = score_keys(task, " ".join(verdict.get("tags") or []))
            verdict["passed"] = bool(verdict["passed"] and right)
            verdict["invented"] = not verdict["passed"] and bool(verdict["invented"] or wrong)
        return verdict


def run_without_agent(task: Task, model: str) -> dict:
    """The baseline: one completion of the same model for the request alone, no tools, no code
    (the answer is scored by the task's keys; a wrong tagged value counts as invented)."""
    import asyncio

    from pi_notebook.ai import complete, get_model
    from pi_notebook.ai.types import Context, UserMessage

    started = time.monotonic()
    message = asyncio.run(complete(get_model(model), Context(messages=[UserMessage(content=task.prompt)])))
    answer = "".join(getattr(c, "text", "") for c in message.content)
    right, wrong = score_keys(task, answer)
    return {"task": task.name, "passed": right, "invented": not right and wrong,
            "seconds": round(time.monotonic() - started, 1), "answer": answer[-300:], "calls": 0}


def summarize(model: str, results: list[dict], label: str = "") -> str:
    passed = sum(r["passed"] for r in results)
    invented = sum(r["invented"] for r in results)
    failed = len(results) - passed - invented
    seconds = sorted(r["seconds"] for r in results if r.get("seconds") is not None)
    median = statistics.median(seconds) if seconds else float("nan")
    p90 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.9))] if seconds else float("nan")
    warm = sorted(r["warm_s"] for r in results if r.get("warm_s") is not None)
    first = (f"; a fresh kernel's first cell waits for the server's warm-up on top (median "
             f"{statistics.median(warm):.1f} s)") if warm else ""
    return (f"{model}{' ' + label if label else ''}: passed {passed}/{len(results)}, invented {invented}, "
            f"failed {failed}; agent cell median {median:.1f} s, p90 {p90:.1f} s{first}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", default="local/qwen2.5-coder-1.5b")
    parser.add_argument("-k", "--tasks", default="", help="comma-separated task names (default: all)")
    parser.add_argument("--set", choices=(*SETS, "all"), default="core",
                        help="core: the 15 tasks the levers were tuned on; heldout: the 12 written "
                             "before tuning and never tuned on; tuning: 10 more requests written to "
                             "tune on; multistep: 13 analysis questions of several steps with a stated "
                             "answer format, never tuned on; multistep-tuning: 10 questions of the same kind "
                             "on other data, to tune on; all: core and held-out")
    parser.add_argument("--no-agent", action="store_true",
                        help="the baseline: one completion per request, no tools (tasks with keys)")
    parser.add_argument("--profile", choices=("small", "default"), default=None)
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--json", default="", help="write the verdicts to this file")
    parser.add_argument("--label", default="", help="a name for this configuration in the summary")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each task's tool calls and results")
    args = parser.parse_args(argv)
    pool = TASKS + HELDOUT_TASKS if args.set == "all" else SETS[args.set]
    chosen = [t for t in pool if not args.tasks or t.name in args.tasks.split(",")]
    print(f"# {len(chosen)} tasks on {args.model}"
          f"{' (' + args.label + ')' if args.label else ''}; load average {os.getloadavg()[0]:.1f}",
          flush=True)
    results = []
    if args.no_agent:
        import pi_notebook.local  # noqa: F401  (registers local/<id>)
    for task in chosen:
        verdict = (run_without_agent(task, args.model) if args.no_agent
                   else run_task(task, args.model, args.profile, args.timeout))
        results.append(verdict)
        mark = "PASS" if verdict["passed"] else ("INVENTED" if verdict["invented"] else "fail")
        seconds = verdict.get("seconds")
        detail = verdict.get("errors") or verdict.get("answer", "")
        warm = f" (+{verdict['warm_s']} s warm-up)" if verdict.get("warm_s") else ""
        print(f"{task.name:<13} {mark:<9} {seconds if seconds is not None else '-':>6} s{warm}  "
              f"calls={verdict.get('calls')}  {textwrap.shorten(str(detail), 150)}", flush=True)
        if args.verbose:
            for step in verdict.get("trace", []):
                print(f"    {step!r}", flush=True)
    print(summarize(args.model, results, args.label), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"model": args.model, "label": args.label,
                                               "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
