"""Generator of the training tickets for the naive-Bayes triage baseline (training/tickets.jsonl).

Why a separate generator: a classifier trained on the eval set, or on text produced by the eval
set's generator, would be graded on sentences it has already seen, and its scores would say
nothing about tickets it has not. This module shares nothing with
``evalsets/generators/support_tickets.py`` except the labelling guideline (documented there):
the phrase banks, templates, noise model and seed are written independently, so the wording
differs the way a team's historical tickets differ from a freshly written eval set. The training
set has no prompt injections and little non-English text, again like a real ticket history.

Run ``python registry/systems/training/generate.py`` from any directory; output is
byte-identical on every run.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

SEED = 7919
COUNT = 1500
HERE = Path(__file__).resolve().parent
OUT_PATH = HERE / "tickets.jsonl"
LIMIT = 500
PRIORITIES = ("low", "medium", "high", "urgent")

NAMES = (
    "Alex Romero", "Bea Lindqvist", "Carlos Mendes", "Dana Whitfield", "Eun-ji Park",
    "Femi Adeyemi", "Gita Rao", "Hugo Lefèvre", "Irina Volkova", "Jack Turner", "Kofi Boateng",
    "Lina Haddad", "Mia Becker", "Nico Russo", "Oscar Lund", "Paula Ortega", "Quinn Avery",
    "Rosa Marquez", "Sam Kirby", "Tariq Aziz",
)
ORGS = (
    "Pinecrest Outfitters", "Redline Couriers", "Saltmarsh Seafood", "Greenway Garden Centre",
    "Summit Dental Group", "Riverbend Hardware", "Foxglove Florists", "Ironbridge Machining",
    "Lakeview Library", "Crescent Coffee Roasters", "Tidewater Marine", "Highland Pet Supply",
)
GEAR: tuple[tuple[str, int, int], ...] = (
    ("handheld reader", 160, 320), ("TagReader Mini", 49, 89), ("thermal label printer", 280, 440),
    ("charging cradle", 35, 70), ("Larkspur Hub", 130, 240), ("Scanner X2", 190, 340),
)
GEAR_BULK: tuple[tuple[str, int, int], ...] = (
    ("pallet of 12 handheld readers", 1900, 3600), ("printer bundle for three sites", 1100, 1700),
    ("20-pack of Scanner X2", 3800, 6200),
)
TASKS = (
    "bulk-update prices from a file", "set up low-stock notifications",
    "create a kit made of several items", "add a second warehouse",
    "export all items with their barcodes", "restrict a user to one location",
    "track serial numbers", "connect our online store", "undo a stock adjustment",
    "archive items we no longer sell",
)
WISHES = (
    "recurring purchase orders", "a calendar view of deliveries", "a Microsoft Teams integration",
    "a custom report builder", "hardware security key login", "an API for locations",
    "item images in exported PDFs", "automatic reorder suggestions", "lot and expiry tracking",
    "a Portuguese version of the app", "role templates", "a public status widget",
    "a dark theme", "bulk editing for many items at once", "more languages in the app",
    "single sign-on for smaller plans",
)
PLACES = ("Kyiv", "Dhaka", "Quito", "Tbilisi", "Bogotá", "Ulaanbaatar", "Accra", "Chiang Mai")
LANDS = ("Ireland", "Chile", "South Africa", "New Zealand", "Poland", "Singapore")


@dataclass(frozen=True)
class Intent:
    """One kind of historical ticket and how the guideline labels it."""

    category: str
    rule: str
    subjects: tuple[str, ...]
    leads: tuple[str, ...]
    asks: tuple[str, ...] = ()
    tiers: tuple[str, ...] = ("free", "pro", "enterprise")
    money: str | None = None
    weight: int = 1


def fixed(priority: str, human: bool) -> str:
    """Encode a fixed label pair as a rule name."""
    return f"{priority}/{'human' if human else 'auto'}"


ANY = ("free", "pro", "enterprise")
PAYING = ("pro", "enterprise")
INTENTS: tuple[Intent, ...] = (
    # ------------------------------------------------------------------ billing
    Intent("billing", "charge",
           ("Payment taken twice", "Double payment", "Duplicate transaction", "Billed two times",
            "Charged double", "Duplicate charge"),
           ("I see the same payment taken two times on {day}, {amt} each.",
            "There's a second, identical transaction of {amt} on our company card.",
            "Looks like you billed us double this cycle: {amt} went out twice.",
            "Our statement lists {amt} from your company twice in the same week.",
            "We got charged {amt} two times for one subscription.",
            "Your system processed our renewal payment of {amt} twice.",
            "The card was debited {amt} and then again an hour later.",
            "Duplicate charge: {amt} appears twice on my credit card statement."),
           ("Can the extra one be returned?", "Kindly reverse the second payment.",
            "How long until the extra payment is back?", "Please send the duplicate back.",
            "It's the card ending in {l4}.", "Our finance team spotted it this morning."),
           PAYING, "charge", 4),
    Intent("billing", "charge",
           ("Bill too high", "Incorrect bill", "We were overbilled", "Invoice error",
            "Wrong amount charged"),
           ("We were billed {amt} more than our agreed rate.",
            "This bill includes {k} users we deleted weeks ago, which adds {amt}.",
            "Our monthly total jumped by {amt} with no change in usage.",
            "A module we never activated costs us {amt} on this bill.",
            "Our invoice shows {amt} for extra seats we never added.",
            "We were invoiced at the old, higher rate: {amt} too much.",
            "The discount we negotiated wasn't applied, so the invoice is {amt} over."),
           ("Please correct it and credit us.", "We'd like the difference back.",
            "Can you send a corrected invoice?"),
           PAYING, "charge", 3),
    Intent("billing", "refund",
           ("Money back please", "Requesting reimbursement", "Return my payment", "Refund?",
            "Refund for renewal", "Refund please"),
           ("Requesting my money back for the {amt} renewal.",
            "We stopped using the service in {mon}; the {amt} yearly payment should be returned.",
            "Nobody told me the trial would turn into a paid plan. I want the {amt} back.",
            "Our team switched providers, so the {amt} charged recently is for nothing.",
            "I picked the yearly option ({amt}) by accident when I meant monthly.",
            "Please refund the {amt} charged for a plan we never used.",
            "Can I get a refund on the annual subscription ({amt})? We cancelled a week after "
            "renewal.",
            "I'm asking for a refund of {amt}; the auto-renew caught me by surprise.",
            "We downgraded but were still charged {amt} for the higher plan. Refund please."),
           ("Please process the refund.", "Thanks for sorting it out.",
            "The account is already cancelled.", "Same card as always."),
           PAYING, "charge", 4),
    Intent("billing", fixed("low", False),
           ("Receipt needed", "Tax ID on bill", "Billing contact", "Statement request",
            "Invoice copy", "Invoice question"),
           ("Could you email the receipt for our last payment?",
            "Our bookkeeper needs a statement showing all payments this year.",
            "The bill should list our tax ID {vat}.",
            "Please make {mail} the billing contact instead of me.",
            "The legal entity on our bills should read {org} Ltd.",
            "Can you resend the invoice for last month?",
            "I can't find the invoice PDF in the billing section.",
            "Please put our purchase order number on future invoices.",
            "We need an invoice addressed to our head office."),
           ("Thanks!", "No rush."), PAYING, None, 3),
    Intent("billing", fixed("medium", False),
           ("Card rejected", "Automatic payment bounced", "Can't save card", "Renewal failed",
            "Payment problem"),
           ("Our card keeps getting rejected when the renewal tries to run.",
            "Got a notice that the automatic payment bounced.",
            "The billing page throws an error when I save new card details.",
            "We want to pay by bank transfer, but only card is offered and ours fails.",
            "The renewal failed and now there's a warning banner in the app.",
            "The payment didn't go through although the card is fine.",
            "Updating our payment method gives an error message."),
           ("What should we do?", "We don't want to lose access."), PAYING, None, 3),
    Intent("billing", fixed("low", False),
           ("Cost question", "Discounts?", "Extra user cost", "Pricing", "Plan prices"),
           ("Is there a cheaper rate if we commit for two years?",
            "What does an extra user cost per month?",
            "Do education customers get a discount?",
            "Can we pay in euros instead of dollars?",
            "Are there setup fees for the Enterprise tier?",
            "How much is the Pro plan for 10 users?",
            "Do you have a price list for Enterprise?",
            "Is there a discount for paying yearly?"),
           (), ANY, None, 3),
    Intent("billing", fixed("medium", False),
           ("End subscription", "Turn off renewal", "Stop our plan", "Cancel plan"),
           ("We'd like to end our subscription.",
            "Turn off the automatic renewal for our workspace please.",
            "Switch us back to the free tier at the next renewal.",
            "Our business is closing, please stop the plan.",
            "Please cancel my subscription, we don't need it anymore.",
            "How do I cancel the plan before it renews?"),
           (), ("pro",), None, 2),
    Intent("billing", fixed("high", True),
           ("Dispute", "Legal", "Complaint - charges", "Fraudulent charges", "Chargeback"),
           ("I'm reporting these {amt} charges to my bank as fraud if they aren't returned.",
            "My solicitor has advised me to pursue the {amt} charge formally.",
            "I will be filing a complaint with the FTC about the {amt} you took.",
            "Expect to hear from our legal team regarding the {amt} you took.",
            "Return the {amt} or I'm going to sue.",
            "This is unacceptable, I'm contacting my lawyer about the {amt} charge.",
            "I'll file a chargeback for {amt} unless you fix this today.",
            "We will take legal action over the {amt} billing error."),
           (), PAYING, "charge", 3),
    Intent("billing", fixed("medium", False),
           ("Price went up", "Cost increase?", "More expensive now"),
           ("The cost per user doubled overnight?",
            "Nobody told us the subscription would get more expensive; it's {amt} now.",
            "Why is my monthly bill higher than before? Now {amt}.",
            "We were not informed of any price change."),
           (), ("pro",), "charge", 1),
    Intent("billing", fixed("high", True),
           ("Renewal concerns", "Contract review", "Switching providers?", "Unhappy customer"),
           ("We're reviewing whether to stay with you when our agreement expires.",
            "A competitor quoted us half your price and our CFO wants to switch.",
            "If the pricing stays like this we won't be renewing the enterprise agreement.",
            "Our leadership is considering moving to another inventory platform at renewal.",
            "Unless the account team contacts us this week, we're cancelling the contract.",
            "We're very unhappy and are evaluating alternatives before the contract renews."),
           (), ("enterprise",), None, 2),
    # ------------------------------------------------------------------ technical
    Intent("technical", "outage",
           ("Platform unreachable", "Total outage", "Server errors everywhere", "App dead",
            "Site down", "Nothing loads"),
           ("The whole platform is unreachable for us.",
            "Every page just times out for everyone here.",
            "Nobody in the company can get past the loading screen.",
            "Your service has been returning server errors all morning for the whole team.",
            "The web app and the phone app are both dead for our entire staff.",
            "Larkspur is down for us, nothing loads.",
            "We get error 503 on every screen and the whole team is affected.",
            "Since this morning the site won't load for anyone in our office.",
            "The dashboard shows an error page for all of our users.",
            "Complete outage on our side, we can't access anything."),
           ("Please look into it.", "Is there an incident?", "Status page shows green.",
            "Tried other browsers, same thing."), ANY, None, 5),
    Intent("technical", "blocking",
           ("Receiving broken", "Pick lists fail", "Can't create items", "Transfers failing",
            "Import failing", "Scanning stopped working"),
           ("Receiving goods is impossible since the last release, the confirm button does "
            "nothing.",
            "We can't generate any pick lists, the page errors out every time.",
            "Creating new items fails with a validation error for every single item.",
            "Transfers between locations fail completely, so stock is stuck.",
            "The import is failing every time and we can't load our new stock.",
            "Scanning doesn't register anything since the update; the warehouse is stuck.",
            "We can't save any purchase order, it errors out.",
            "Stock adjustments won't save, so our count is stuck."),
           ("This stops our work.", "No workaround found.", "It worked fine last week."),
           ANY, None, 4),
    Intent("technical", fixed("medium", False),
           ("Display glitch", "Report rounding", "Duplicate notifications", "Filter bug",
            "Small bug", "Minor issue"),
           ("The totals row on the valuation report is off by a few cents.",
            "Tooltips overlap the buttons on small screens.",
            "Our logo appears stretched on printed labels.",
            "Notifications show twice in the bell menu.",
            "Filters reset when I go back to the previous page.",
            "Small bug: the export file has the wrong date format.",
            "The chart on the reports page doesn't render in Safari; it works in Chrome.",
            "Sorting by name puts lowercase items last.",
            "The search box loses focus after every letter on the mobile site.",
            "Column widths reset every time I reload the page."),
           ("We can live with it for now.", "There's a workaround, just reporting it.",
            "Not urgent."), ANY, None, 4),
    Intent("technical", fixed("medium", False),
           ("Xero sync", "Webhook order", "WooCommerce plugin", "API 401s", "Slack bot",
            "Integration broken", "Sync issue"),
           ("The Xero connection stopped syncing invoices.",
            "Our webhook endpoint receives events in the wrong order.",
            "The WooCommerce plugin fails to update stock.",
            "API calls intermittently return 401 even with a valid token.",
            "The Slack bot posts alerts in the wrong channel.",
            "The Shopify connection stopped updating stock levels.",
            "Our webhooks haven't fired since yesterday.",
            "API requests get rate limited (429) well under our quota.",
            "Slack notifications have stopped arriving."),
           ("Reconnecting didn't help.",), ANY, None, 4),
    Intent("technical", fixed("medium", False),
           ("Sluggish", "Slow loading", "Scanning lag", "Performance"),
           ("Everything is sluggish since yesterday.",
            "Loading a location with many bins takes over a minute.",
            "The barcode lookup waits several seconds per scan.",
            "Pages take ages to load lately.",
            "The app became very slow after the last update.",
            "Reports take minutes to generate now."),
           (), ANY, None, 2),
    Intent("technical", fixed("medium", False),
           ("Phone app quits", "Tablet app crash", "App shuts down", "Android crash",
            "iPhone app crash"),
           ("The phone app quits whenever I open the camera.",
            "The tablet app crashes on startup after the update.",
            "The app shuts down when switching between locations.",
            "The Android app crashes when I tap scan.",
            "The iPhone app closes immediately after opening.",
            "The app freezes when uploading photos."),
           ("Reinstalled already.",), ANY, None, 3),
    Intent("technical", fixed("medium", False),
           ("Reader not detected", "Printer offline", "Hub connection", "Pairing fails"),
           ("The {gear} isn't detected over Bluetooth.",
            "Our new {gear} shows offline in the app even though it's on the network.",
            "The hub keeps dropping the connection to the tags.",
            "The {gear} won't connect to the hub.",
            "Bluetooth pairing with the {gear} fails every time."),
           (), ANY, None, 2),
    Intent("technical", fixed("low", False),
           ("Setup help", "How-to question", "Guide request", "Where is this setting?",
            "Question", "How to?"),
           ("What's the way to {task}?", "Is there a guide for how to {task}?",
            "Can you explain how to {task}?", "Where in settings do I {task}?",
            "How do I {task}?", "How can I {task}?", "Is it possible to {task}?",
            "Quick question: how to {task}?"),
           (), ANY, None, 5),
    # ------------------------------------------------------------------ account
    Intent("account", "lockout",
           ("Sign-in problem", "Reset link expired", "Blocked from logging in", "Login loop",
            "Can't sign in", "Account locked"),
           ("I'm unable to sign in, it keeps saying invalid credentials.",
            "The reset link says it's expired every time I click it.",
            "Too many attempts and now I'm blocked from logging in.",
            "The login page loops back to itself after I enter my details.",
            "I can't log into my account.",
            "Password reset emails are not arriving.",
            "My account is locked after failed attempts.",
            "It says my username doesn't exist."),
           (), ANY, None, 4),
    Intent("account", fixed("low", False),
           ("Profile update", "Name spelling", "Account language", "New login email",
            "Change email"),
           ("I need to update the phone number on my profile.",
            "Please correct the spelling of my name in the account.",
            "Where do I change the language of my account?",
            "I'd like to use {mail} as my login instead.",
            "How do I change my email address?",
            "Please change our company name on the account."),
           (), ANY, None, 2),
    Intent("account", fixed("low", False),
           ("User permissions", "Deactivate user", "Admin rights", "Add a user"),
           ("How can I limit what a new employee can see?",
            "Please deactivate the user {mail}, she no longer works here.",
            "How do I promote a colleague to administrator?",
            "How do I add a new user with limited access?",
            "Remove an ex-employee from our workspace please."),
           (), PAYING, None, 2),
    Intent("account", fixed("medium", True),
           ("Admin access", "Former owner", "Ownership transfer"),
           ("Our former manager owned the account and left without handing it over.",
            "The only admin is no longer with us and we need admin access transferred.",
            "We need to transfer account ownership to a new manager.",
            "The owner of our workspace left the company, please move ownership to me."),
           (), PAYING, None, 2),
    Intent("account", fixed("low", False),
           ("Close account", "Remove profile", "Delete account"),
           ("Close my account please.", "I want my profile removed, I don't use it.",
            "How do I delete my account?"),
           (), ("free",), None, 1),
    Intent("account", fixed("medium", True),
           ("Subject access request", "Data erasure", "Personal data export", "GDPR request"),
           ("I'd like to know what personal information you have stored on me (subject access "
            "request).",
            "Erase every record about me in line with data protection law.",
            "Please provide an export of my personal data under data-protection regulations.",
            "GDPR request: please send me all the data you store about me.",
            "I request deletion of my personal data under GDPR.",
            "Under the CCPA I want to know what data you collected about me."),
           (), ANY, None, 2),
    Intent("account", fixed("medium", True),
           ("Verification code", "Two-step problem", "No access to authenticator", "2FA reset"),
           ("My authenticator was on a phone I lost, and the login asks for a code I can't get.",
            "I can't receive the SMS verification code since changing my number.",
            "Two-step verification is blocking me and my recovery codes are gone.",
            "Lost my phone with the authenticator app, so I can't log in.",
            "I need two-factor authentication reset because I have a new phone.",
            "I don't have my backup codes and 2FA won't let me in."),
           (), ANY, None, 2),
    # ------------------------------------------------------------------ shipping
    Intent("shipping", fixed("low", False),
           ("Dispatch date", "Shipped yet?", "Order update", "Tracking number"),
           ("Any update on when my hardware ships?",
            "Just checking the dispatch date for purchase {order}.",
            "Has order {order} left the warehouse?",
            "When will my order ship?",
            "Can I get the tracking number for my order?",
            "I placed an order last week; has it been shipped?"),
           (), ANY, None, 3),
    Intent("shipping", fixed("medium", False),
           ("Package overdue", "Delivery date passed", "Tracking frozen", "Late delivery"),
           ("My package is overdue by several days.",
            "The delivery date has passed and the courier has no information.",
            "Tracking for {order} has been frozen since last week.",
            "My order is late and the tracking hasn't moved.",
            "Delivery was expected days ago and nothing has arrived.",
            "The courier keeps postponing the delivery of {order}."),
           (), ANY, None, 3),
    Intent("shipping", "goods",
           ("Broken device", "Shattered on arrival", "Dented parcel", "Damaged item"),
           ("The device was broken when we opened the box ({gear}, {amt}).",
            "The screen of our {gear} was shattered on arrival; we paid {amt}.",
            "The {gear} arrived dented and won't turn on. Order value {amt}.",
            "Our {gear} ({amt}) arrived damaged, the case is cracked.",
            "We received a broken {gear}, the box was crushed. Paid {amt}."),
           ("We need a replacement.", "Photos available."), ANY, "goods", 3),
    Intent("shipping", fixed("medium", False),
           ("Incorrect model", "Someone else's parcel", "Wrong contents", "Wrong item"),
           ("You sent us the wrong model.", "The parcel contained someone else's items.",
            "We got a {gear} instead of what we ordered.",
            "We received the wrong item in order {order}."),
           (), ANY, None, 2),
    Intent("shipping", "goods",
           ("Parcel never received", "Missing shipment", "Lost package"),
           ("The courier claims the parcel was delivered but nobody received it. It contained a "
            "{gear} ({amt}).",
            "Our shipment with the {gear} ({amt}) is missing and the carrier opened an "
            "investigation.",
            "Tracking says delivered but the package isn't here: {gear}, {amt}.",
            "The carrier lost our package with the {gear} ({amt})."),
           (), ANY, "goods", 2),
    Intent("shipping", fixed("medium", False),
           ("Redirect shipment", "Delivery address typo", "Change address"),
           ("I need to redirect my shipment to a different address.",
            "The delivery address on {order} has a typo, it should be {street}.",
            "Please change the shipping address for my order before it ships.",
            "Can you update the delivery address on {order}?"),
           (), ANY, None, 2),
    Intent("shipping", fixed("medium", False),
           ("Stop my hardware order", "Cancel purchase", "Cancel order"),
           ("Please stop order {order} before it's dispatched.",
            "I'd like to cancel the hardware I bought today.",
            "Cancel my hardware order {order} please.",
            "I ordered the wrong device, please cancel the order."),
           (), ANY, None, 2),
    Intent("shipping", fixed("low", False),
           ("Import taxes", "Delivery countries", "International shipping"),
           ("Do prices include import taxes for deliveries to {land}?",
            "Can you deliver to {land}?",
            "Will there be customs fees shipping to {land}?",
            "How long is delivery to {land}?"),
           (), ANY, None, 1),
    # ------------------------------------------------------------------ security
    Intent("security", fixed("urgent", True),
           ("Account misuse", "New device sign-in", "Unfamiliar admin", "Email switched",
            "Hacked?", "Unauthorized access"),
           ("Someone has been using my login; there are changes I didn't make.",
            "I got a notification that a new device signed in from {place}, but it wasn't mine.",
            "An unfamiliar user was added to our workspace with admin rights.",
            "My account email was switched to an address I don't own.",
            "Someone logged into my account and it wasn't me.",
            "I think my account was hacked, the password was changed.",
            "Login alert from {place} that wasn't me.",
            "Strange purchase orders appeared that none of us made."),
           ("Please lock it down.",), ANY, None, 4),
    Intent("security", fixed("urgent", True),
           ("Wrong business data", "Shared link exposed", "Foreign invoices", "Data leak"),
           ("I can see records that belong to a different business.",
            "Our confidential pricing sheet is visible through a shared link to anyone.",
            "Another customer's bills show up in my billing history.",
            "I'm seeing another customer's inventory in my account.",
            "A report we downloaded shows data from a different company."),
           (), ANY, None, 2),
    Intent("security", fixed("urgent", True),
           ("Secret exposed", "Token misuse", "API key leaked"),
           ("Our integration secret was exposed in a public forum post.",
            "A former employee still has our API token and we see activity from it.",
            "We accidentally published our API key on GitHub.",
            "Our API key leaked, please help us revoke it."),
           (), PAYING, None, 1),
    Intent("security", fixed("high", True),
           ("Fake login page", "Scam messages", "Lookalike domain", "Phishing"),
           ("Got a fake login page email using your branding.",
            "Scam messages pretending to be your billing department are going around.",
            "A suspicious email from a lookalike domain is asking for a password reset.",
            "I got a phishing email pretending to be Larkspur.",
            "Is this email asking for my password really from you? Looks like phishing.",
            "Our staff received a fake invoice email with your logo."),
           (), ANY, None, 2),
    Intent("security", fixed("high", True),
           ("Security flaw", "Bug bounty", "Data leak in API", "Vulnerability"),
           ("Found a security flaw: the export URLs are guessable.",
            "Bug bounty submission: SQL injection in the search parameter.",
            "Your API leaks the email addresses of other users through the invite endpoint.",
            "I'd like to report a security vulnerability in your login page.",
            "Responsible disclosure: cross-site scripting in item names.",
            "Security researcher here, I found an access control issue."),
           (), ANY, None, 2),
    Intent("security", fixed("high", True),
           ("Impersonation", "Caller posing as staff", "Suspicious call"),
           ("A caller posing as your staff wanted my login details.",
            "Someone emailed pretending to be your CEO and asked for gift cards.",
            "Someone phoned asking for my verification code, saying they were from support.",
            "We got a call from 'Larkspur' asking for admin passwords."),
           (), ANY, None, 1),
    # ------------------------------------------------------------------ feature requests
    Intent("feature_request", fixed("low", False),
           ("Idea", "Request", "Product feedback", "Wishlist", "Feature request", "Suggestion"),
           ("Would you consider building {wish}?", "We really need {wish}.",
            "Is {wish} something you're planning?", "Our team keeps asking for {wish}.",
            "Vote from us for {wish}.", "Feature request: {wish}.",
            "It would be really useful to have {wish}.", "Please add {wish}.",
            "Any chance of {wish} on the roadmap?", "Suggestion for the product: {wish}.",
            "+1 for {wish}."),
           ("Thanks for listening.", "We'd pay extra for it."), ANY, None, 5),
    # ------------------------------------------------------------------ other
    Intent("other", fixed("low", False),
           ("Love it", "Shout-out", "Thanks", "Kudos"),
           ("Love the latest update!", "Your agent went above and beyond for us.",
            "Thanks for such a reliable product.", "Great job on the new release.",
            "Just a quick thank you to your support team."),
           (), ANY, None, 2),
    Intent("other", fixed("low", False),
           ("Marketplace listing", "Co-marketing", "Article", "Careers", "Outsourcing offer",
            "Partnership", "Press"),
           ("We'd like to list Larkspur in our marketplace.",
            "Interested in co-marketing opportunities.",
            "Writing an article on inventory tools, can I ask a few questions?",
            "Do you have open positions in customer success?",
            "We offer outsourced support agents at low rates.",
            "We'd like to discuss a partnership with Larkspur.",
            "Do you have a reseller or affiliate program?",
            "I'm a reporter working on a story about inventory software.",
            "I'd like to apply for a job at Larkspur.",
            "Can I offer you our SEO services?"),
           (), ANY, None, 3),
    Intent("other", fixed("low", False),
           ("Test", "Wrong address", "Newsletter", "Hello"),
           ("Test message, please ignore.", "Sorry, wrong address.",
            "Unsubscribe me from the newsletter.", "Hello?"),
           (), ANY, None, 1),
)

FOREIGN: tuple[tuple[str, str, str], ...] = (
    ("Quiero un reembolso de {amt}, ya no usamos la herramienta.", "billing", "refund"),
    ("Ich kann mich nicht mehr anmelden.", "account", "lockout"),
    ("Ma commande n'est toujours pas arrivée.", "shipping", fixed("medium", False)),
    ("O sistema está fora do ar para toda a equipe.", "technical", "outage"),
    ("Me gustaría que añadieran {wish}.", "feature_request", fixed("low", False)),
)
GREET = (
    "Hello support,", "Hi folks,", "Good afternoon,", "Hiya,", "To whom it may concern,",
    "Hi,", "Hello,", "Morning team,", "Dear Larkspur,",
)
SIGN = (
    "Best wishes,", "Thanks a lot,", "Speak soon,", "All the best,", "Warmly,", "Thanks,",
    "Regards,", "Cheers,",
)
JOBS = (
    "Purchasing Lead", "Operations Manager", "Inventory Manager", "Office Administrator",
    "Founder", "Finance Manager", "IT Administrator", "Shop Owner", "Logistics Coordinator",
    "Accountant", "General Manager", "Warehouse Lead",
)
FILLER = (
    "We're a team of about {k}0 people.", "I'm writing from my phone, sorry for brevity.",
    "This is my first time contacting you.", "Our account is under {org}.",
    "Appreciate your help.", "Tell me if you need more details.",
    "I'm the main contact for our company.", "Feel free to call me if easier.",
    "We've been with you for a few years now.", "Our workspace is {org}.",
)


def label(intent: Intent, tier: str, amount: int | None) -> tuple[str, bool]:
    """The guideline's priority and needs_human for an intent."""
    above = amount is not None and amount > LIMIT
    if "/" in intent.rule:
        priority, who = intent.rule.split("/")
        return priority, who == "human"
    if intent.rule == "outage":
        return {"free": ("medium", False), "pro": ("high", True),
                "enterprise": ("urgent", True)}[tier]
    if intent.rule == "blocking":
        return ("medium", False) if tier == "free" else ("high", True)
    if intent.rule == "charge":
        return ("high", True) if above else ("medium", False)
    if intent.rule in ("refund", "goods"):
        return "medium", above
    if intent.rule == "lockout":
        return ("high", True) if tier == "enterprise" else ("medium", False)
    raise ValueError(intent.rule)


def slots(rng: random.Random, intent: Intent, tier: str) -> tuple[dict[str, str], int | None]:
    """Fill template slots; returns the money at stake, if any."""
    org = rng.choice(ORGS)
    gear, lo, hi = rng.choice(GEAR)
    amount: int | None = None
    if intent.money == "charge":
        big = rng.random() < (0.65 if tier == "enterprise" else 0.3)
        amount = rng.randint(520, 8000) if big else rng.randint(15, 480)
    elif intent.money == "goods":
        if rng.random() < 0.4:
            gear, lo, hi = rng.choice(GEAR_BULK)
        amount = rng.randint(lo, hi)
    values = {
        "day": f"the {rng.randint(1, 28)}th", "mon": rng.choice(("spring", "last quarter", "May")),
        "amt": f"${amount:,}" if amount is not None else "",
        "k": str(rng.randint(2, 9)), "vat": f"VAT {rng.randint(10**8, 10**9 - 1)}",
        "mail": f"{rng.choice(NAMES).split()[0].lower()}@{org.split()[0].lower()}.test",
        "org": org, "gear": gear, "task": rng.choice(TASKS), "wish": rng.choice(WISHES),
        "order": f"#{rng.randint(40000, 99999)}", "street": f"{rng.randint(1, 300)} Station Road",
        "land": rng.choice(LANDS), "place": rng.choice(PLACES), "l4": str(rng.randint(1000, 9999)),
    }
    return values, amount


def noisy(rng: random.Random, text: str) -> str:
    """Light, realistic noise: dropped letters or lowercase without punctuation."""
    roll = rng.random()
    if roll < 0.12:
        words = text.split(" ")
        for i, word in enumerate(words):
            if len(word) > 4 and word.isalpha() and rng.random() < 0.2:
                j = rng.randrange(1, len(word) - 1)
                words[i] = word[:j] + word[j + 1:]
        return " ".join(words)
    if roll < 0.2:
        return re.sub(r"[.,!?]", "", text).lower()
    return text


def one_ticket(rng: random.Random, intents: list[Intent]) -> dict[str, object]:
    """Compose one historical ticket."""
    intent = rng.choice(intents)
    tier = rng.choice(intent.tiers)
    values, amount = slots(rng, intent, tier)
    lead = rng.choice(intent.leads).format(**values)
    subject = rng.choice(intent.subjects)
    category = intent.category
    priority, human = label(intent, tier, amount)
    roll = rng.random()
    if roll < 0.03:
        text, category, rule = rng.choice(FOREIGN)
        amount = rng.randint(20, 3000) if "{amt}" in text else None
        values["amt"] = f"${amount:,}" if amount is not None else ""
        lead = text.format(**values)
        subject = rng.choice(("Ayuda", "Hilfe", "Aide", "Ajuda", "Support request"))
        priority, human = label(Intent(category, rule, (), ()), tier, amount)
        intent = Intent(category, rule, (subject,), (lead,))
    elif roll < 0.09:
        other = rng.choice([x for x in intents if x.category != category])
        tier2 = tier if tier in other.tiers else rng.choice(other.tiers)
        if tier2 == tier:
            v2, amount2 = slots(rng, other, tier)
            p2, _ = label(other, tier, amount2)
            lead += " Also: " + rng.choice(other.leads).format(**v2)
            if PRIORITIES.index(p2) > PRIORITIES.index(priority):
                category, priority = other.category, p2
            human = True
    parts = [lead]
    if intent.asks and rng.random() < 0.5:
        parts.append(rng.choice(intent.asks))
    if rng.random() < 0.3:
        parts.insert(0 if rng.random() < 0.5 else len(parts), rng.choice(FILLER).format(**values))
    body = noisy(rng, " ".join(parts))
    channel = rng.choice(("email", "email", "chat", "web"))
    person = rng.choice(NAMES)
    if channel == "email":
        lines = [rng.choice(GREET), "", body, "", rng.choice(SIGN), person]
        if tier != "free" and rng.random() < 0.6:
            lines.append(f"{rng.choice(JOBS)} | {values['org']}")
        body = "\n".join(lines)
    elif channel == "web":
        org = f"\nCompany: {values['org']}" if tier != "free" else ""
        body = f"Contact form\nFrom: {person} <{values['mail']}>{org}\nDetails:\n{body}"
    elif rng.random() < 0.3:
        body = rng.choice(("hi ", "hello ", "hey! ")) + body
    if rng.random() < 0.03:
        subject = "URGENT: " + subject
    return {
        "subject": subject, "body": body, "channel": channel, "customer_tier": tier,
        "category": category, "priority": priority, "needs_human": human,
    }


def build(seed: int = SEED, count: int = COUNT) -> list[dict[str, object]]:
    """All training rows, ids in file order."""
    rng = random.Random(seed)
    weighted = [intent for intent in INTENTS for _ in range(intent.weight)]
    rows = []
    for i in range(1, count + 1):
        row = {"id": f"tr-{i:05d}", **one_ticket(rng, weighted)}
        rows.append(row)
    return rows


def main() -> None:
    """Write the training file."""
    rows = build()
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    OUT_PATH.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {len(rows)} training tickets to {OUT_PATH.name}")


if __name__ == "__main__":
    main()
